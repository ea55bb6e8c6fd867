"""``AsyncMongoScheduler`` keeps every guarantee of the port's asyncio face: on mongomock
(its calls run inline by the asyncio driver: fast, always) and on the server at
``FLOWSCHED_MONGO_URI`` (pymongo's ``AsyncMongoClient``)."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from flowsched import AsyncMongoScheduler, ManualClock, RedeliveryPolicy  # noqa: E402
from flowsched.testing import check_async_scheduler_port  # noqa: E402

URI = os.environ.get("FLOWSCHED_MONGO_URI")


def on_mongomock(clock: ManualClock, **options: Any) -> AsyncMongoScheduler:
    collection = mongomock.MongoClient(tz_aware=True)["flowsched"][uuid.uuid4().hex]
    return AsyncMongoScheduler(collection, node_id="test", clock=clock, **options)


def test_on_mongomock_it_keeps_every_guarantee() -> None:
    check_async_scheduler_port(
        on_mongomock,
        redelivery_factory=lambda clock, policy: on_mongomock(clock, redelivery=policy),
    )


@pytest.mark.wire
@pytest.mark.skipif(not URI, reason="needs FLOWSCHED_MONGO_URI")
def test_on_the_server_it_keeps_every_guarantee() -> None:
    from pymongo import AsyncMongoClient

    database = f"flowsched_async_port_{uuid.uuid4().hex[:10]}"

    def on_server(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> Any:
        client: Any = AsyncMongoClient(URI, tz_aware=True)
        collection = client[database][uuid.uuid4().hex[:12]]
        return AsyncMongoScheduler(collection, node_id="test", clock=clock, redelivery=policy)

    check_async_scheduler_port(on_server, redelivery_factory=on_server)
