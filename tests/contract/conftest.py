"""Fixtures for the contract tests that are not part of ``check_scheduler_port``.

The port's contract itself lives in :mod:`flowsched.testing` and runs on every adapter in
``test_check_scheduler_port.py``. The tests here cover what a plain ``factory(clock)``
cannot reach (observers, handler-name validation, MongoDB's claims), on every adapter:
``make_scheduler(clock, **options)`` builds and starts the adapter under test. Options every
adapter accepts: ``redelivery`` (a ``RedeliveryPolicy``) and ``observer``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from flowsched.clock import ManualClock
from flowsched.port import ScheduleItem, SchedulerPort

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
        scheduler.start()  # on a ManualClock: no thread, attached to the clock
        return scheduler

    yield make
    for scheduler in built:
        scheduler.close()


def fire(scheduler: SchedulerPort) -> None:
    """Nothing: every adapter, once started, has delivered inside ``ManualClock.advance``
    (the contract), so calling ``run_due`` here would hide a missed delivery."""


# -- helpers for the contract tests ------------------------------------------------------

START = datetime(2026, 1, 1, tzinfo=UTC)
"""Where every contract test's clock starts (whole milliseconds: MongoDB stores ms)."""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(name="fire")
def _fire_fixture() -> Callable[[SchedulerPort], None]:
    return fire


@dataclass(frozen=True)
class Delivery:
    """One handler call as the recorder saw it."""

    item: ScheduleItem
    attempt: int
    at: datetime

    @property
    def id(self) -> str:
        return self.item.id


class Recorder:
    """A handler that records every call, and fails for the ids it was told to fail."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.deliveries: list[Delivery] = []
        self._failures: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def fail(self, item_id: str, times: int | None = None) -> None:
        """Raise for ``item_id``'s next ``times`` deliveries (``None``: always)."""
        self._failures[item_id] = times

    def __call__(self, item: ScheduleItem, attempt: int) -> None:
        with self._lock:
            self.deliveries.append(Delivery(item, attempt, self.clock.now()))
            if item.id in self._failures:
                left = self._failures[item.id]
                if left is None or left > 0:
                    self._failures[item.id] = None if left is None else left - 1
                    raise RuntimeError(f"handler failed for {item.id}")

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.deliveries]

    def of(self, item_id: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.id == item_id]


@pytest.fixture
def recorder(clock: ManualClock) -> Recorder:
    return Recorder(clock)
