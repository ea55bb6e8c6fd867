"""Fixtures for the console's tests: a seeded mongomock namespace and HTTP clients on it."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import pytest

NEEDED = ("starlette", "jinja2", "multipart", "httpx", "mongomock")
MISSING = [name for name in NEEDED if importlib.util.find_spec(name) is None]
if MISSING:  # the console extra is not installed (make venv installs it): nothing to test
    collect_ignore_glob = ["test_*.py"]
else:
    import mongomock
    from console_kit import START, dead_letter, make_index, timer
    from starlette.testclient import TestClient

    from flowsched.clock import ManualClock
    from flowsched.console import app


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db() -> Any:
    database = mongomock.MongoClient(tz_aware=True)["flowsched"]
    make_index(database["timers"])
    return database


@pytest.fixture
def seeded(db: Any) -> Any:
    """120 timers t-00000..t-00119, one dead letter ``d-1``."""
    db.timers.insert_many([timer(n) for n in range(120)])
    db.timers_dead.insert_one(dead_letter("d-1"))
    return db


@pytest.fixture
def client(seeded: Any, clock: ManualClock) -> Iterator[Callable[..., TestClient]]:
    """``client(token=None, target=None, **app_options)``: an HTTP client on the seeded
    namespace (``users=USERS`` for the kit's identities)."""
    opened: list[TestClient] = []

    def build(token: str | None = None, target: Any = None, **options: Any) -> TestClient:
        test_client = TestClient(
            app(target if target is not None else seeded, token=token, clock=clock, **options)
        )
        opened.append(test_client)
        return test_client

    yield build
    for test_client in opened:
        test_client.close()
