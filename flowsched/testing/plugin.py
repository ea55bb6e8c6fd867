"""The pytest fixtures of the test kit, loaded by pytest through flowsched's ``pytest11``
entry point (no conftest needed): ``manual_clock``, ``memory_scheduler``,
``mongo_scheduler`` and ``scheduler``. See :mod:`flowsched.testing`."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from flowsched.clock import ManualClock
from flowsched.memory import InMemoryScheduler
from flowsched.port import SchedulerPort
from flowsched.testing._trial import CLOCK_START

__all__ = ["manual_clock", "memory_scheduler", "mongo_scheduler", "scheduler"]

MONGO_URI_VARIABLE = "FLOWSCHED_MONGO_URI"


@pytest.fixture
def manual_clock() -> ManualClock:
    """A :class:`~flowsched.ManualClock` at 2026-01-01T00:00:00Z: time moves only when the
    test calls ``advance`` (which delivers what falls due, each item at its due time)."""
    return ManualClock(CLOCK_START)


@pytest.fixture
def memory_scheduler(manual_clock: ManualClock) -> Iterator[InMemoryScheduler]:
    """A started :class:`~flowsched.InMemoryScheduler` on ``manual_clock``, closed after."""
    scheduler = InMemoryScheduler(clock=manual_clock)
    scheduler.start()
    yield scheduler
    scheduler.close()


@pytest.fixture(scope="session")
def _flowsched_mongo_client() -> Iterator[Any]:
    """One client per session: to the server at ``FLOWSCHED_MONGO_URI``, else mongomock."""
    uri = os.environ.get(MONGO_URI_VARIABLE)
    if uri:
        pymongo = pytest.importorskip("pymongo", reason="the mongo_scheduler fixture needs pymongo")
        client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    else:
        pytest.importorskip("pymongo", reason="the mongo_scheduler fixture needs pymongo")
        mongomock = pytest.importorskip(
            "mongomock",
            reason=f"mongo_scheduler needs mongomock, or a server at {MONGO_URI_VARIABLE}",
        )
        client = mongomock.MongoClient()
    yield client
    client.close()


@pytest.fixture
def mongo_scheduler(manual_clock: ManualClock, _flowsched_mongo_client: Any) -> Iterator[Any]:
    """A started :class:`~flowsched.MongoScheduler` on ``manual_clock`` over the collection
    ``timers`` of a database of its own (dropped after the test)."""
    from flowsched.mongo import MongoScheduler

    name = f"flowsched_test_{uuid.uuid4().hex[:12]}"
    database = _flowsched_mongo_client[name]
    scheduler = MongoScheduler(database["timers"], node_id="test", clock=manual_clock)
    scheduler.start()
    yield scheduler
    scheduler.close()
    _flowsched_mongo_client.drop_database(name)


@pytest.fixture(params=["memory", "mongo"])
def scheduler(request: pytest.FixtureRequest) -> SchedulerPort:
    """Each adapter in turn (the test runs once per adapter): ``memory_scheduler``, then
    ``mongo_scheduler``."""
    built: SchedulerPort = request.getfixturevalue(f"{request.param}_scheduler")
    return built
