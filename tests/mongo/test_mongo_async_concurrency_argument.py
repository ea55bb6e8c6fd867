"""``AsyncMongoScheduler``'s slots are ``concurrency``: a bad value is refused naming it (not
``workers``, the threaded face's word), and ``from_config`` then closes the client and the
executor it made (issue 37: it said ``workers`` and leaked its client)."""

from __future__ import annotations

from typing import Any

import mongomock
import pytest

from flowsched import AsyncMongoScheduler, SchedulingConfig

CONF = """
ipf-scheduler.mongodb {
  uri = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100"
  database-name = "app"
  collection = "timers"
}
"""


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_a_bad_concurrency_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"AsyncMongoScheduler concurrency must be .*got"):
        AsyncMongoScheduler(mongomock.MongoClient().db.timers, concurrency=bad)


def test_from_config_closes_the_client_it_made_when_the_arguments_are_refused() -> None:
    made: list[Any] = []

    class Client:
        closed = False

        def __init__(self, uri: str, **options: Any) -> None:
            made.append(self)

        def __getitem__(self, name: str) -> Any:
            return mongomock.MongoClient()[name]

        async def close(self) -> None:
            self.closed = True

    config = SchedulingConfig.from_string(CONF)
    with pytest.raises(ValueError, match="concurrency"):
        AsyncMongoScheduler.from_config(config, client_factory=Client, concurrency=0)
    assert [client.closed for client in made] == [True]
