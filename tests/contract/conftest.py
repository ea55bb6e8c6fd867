"""The contract suite runs against every SchedulerPort adapter.

``make_scheduler(clock, **options)`` builds the adapter under test; ``fire(scheduler)``
delivers whatever is due by the clock's current time (a no-op for the in-memory adapter,
which fires inside ``ManualClock.advance``; one sweep for MongoDB). Options every adapter
accepts: ``redelivery`` (a ``RedeliveryPolicy``) and ``observer``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from flowsched.clock import ManualClock
from flowsched.port import SchedulerPort

Factory = Callable[..., SchedulerPort]


def _memory(request: pytest.FixtureRequest) -> Factory:
    from flowsched.memory import InMemoryScheduler

    return lambda clock, **options: InMemoryScheduler(clock=clock, **options)


def _mongomock(request: pytest.FixtureRequest) -> Factory:
    mongomock = pytest.importorskip("mongomock")
    mongo = pytest.importorskip("flowsched.mongo")
    db = mongomock.MongoClient()["flowsched_contract"]
    return lambda clock, **options: mongo.MongoScheduler(
        db["timers"], node_id="contract", clock=clock, **options
    )


def _wire(request: pytest.FixtureRequest) -> Factory:
    mongo = pytest.importorskip("flowsched.mongo")
    db = request.getfixturevalue("mongo_db")
    return lambda clock, **options: mongo.MongoScheduler(
        db["timers"], node_id="contract", clock=clock, **options
    )


ADAPTERS: dict[str, Callable[[pytest.FixtureRequest], Factory]] = {
    "memory": _memory,
    "mongomock": _mongomock,
    "mongo-wire": _wire,
}


@pytest.fixture(params=list(ADAPTERS))
def adapter_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_scheduler(request: pytest.FixtureRequest, adapter_name: str) -> Iterator[Factory]:
    factory = ADAPTERS[adapter_name](request)
    built: list[SchedulerPort] = []

    def make(clock: ManualClock, **options: Any) -> SchedulerPort:
        scheduler = factory(clock, **options)
        built.append(scheduler)
        return scheduler

    yield make
    for scheduler in built:
        scheduler.close()


def fire(scheduler: SchedulerPort) -> None:
    """Deliver what is due now (MongoDB needs an explicit sweep under a ManualClock)."""
    run_due = getattr(scheduler, "run_due", None)
    if run_due is not None:
        run_due()
