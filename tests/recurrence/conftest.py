"""Fixtures for recurring items with ends and calendars on the adapters: ``make()`` builds and
starts a scheduler of the adapter under test on a shared ``ManualClock``; on MongoDB every
scheduler of one test shares one collection (a second one is a second node, or the same
service after a restart)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from flowsched import InMemoryScheduler, ManualClock, SchedulerPort

START = datetime(2026, 12, 23, 12, tzinfo=UTC)
"""A Wednesday, two days before Christmas."""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def collection() -> Any:
    mongomock = pytest.importorskip("mongomock")
    return mongomock.MongoClient()["flowsched"]["timers"]


def _factory(name: str, request: pytest.FixtureRequest) -> Callable[..., SchedulerPort]:
    if name == "memory":
        return lambda clock, node, **options: InMemoryScheduler(clock=clock, **options)
    mongo = pytest.importorskip("flowsched.mongo")
    if name == "mongomock":
        collection = request.getfixturevalue("collection")
    else:
        collection = request.getfixturevalue("mongo_db")["timers"]
    return lambda clock, node, **options: mongo.MongoScheduler(
        collection, node_id=node, clock=clock, **options
    )


@pytest.fixture(params=["memory", "mongomock"])
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(
    request: pytest.FixtureRequest, adapter: str, clock: ManualClock
) -> Iterator[Callable[..., SchedulerPort]]:
    """``make(node="n1", start=True, **options)``: a scheduler of the adapter under test,
    started unless ``start=False`` (then it runs only when its ``run_due`` is called)."""
    factory = _factory(adapter, request)
    built: list[SchedulerPort] = []

    def build(node: str = "n1", *, start: bool = True, **options: Any) -> SchedulerPort:
        scheduler = factory(clock, node, **options)
        built.append(scheduler)
        if start:
            scheduler.start()  # on a ManualClock: attached to it, no thread
        return scheduler

    yield build
    for scheduler in built:
        scheduler.close()
