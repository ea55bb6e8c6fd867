"""Fixtures for the contract tests that are not part of ``check_scheduler_port``.

The port's contract itself lives in :mod:`flowsched.testing` and runs on every adapter in
``test_check_scheduler_port.py``. The tests here cover what a plain ``factory(clock)``
cannot reach (observers, handler-name validation, MongoDB's claims), on every adapter:
``make_scheduler(clock, **options)`` builds and starts the adapter under test. Options every
adapter accepts: ``redelivery`` (a ``RedeliveryPolicy``) and ``observer``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from flowsched.clock import ManualClock
from flowsched.port import SchedulerPort
from flowsched.testing._trial import CLOCK_START, Recorder

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


def _postgres(request: pytest.FixtureRequest) -> Factory:
    postgres = pytest.importorskip("flowsched.postgres")
    url = request.getfixturevalue("postgres_url")
    table = request.getfixturevalue("fresh_table")()
    return lambda clock, **options: postgres.PostgresScheduler(
        url, table=table, node_id="contract", clock=clock, pool_size=2, **options
    )


ADAPTERS: dict[str, Callable[[pytest.FixtureRequest], Factory]] = {
    "memory": _memory,
    "mongomock": _mongomock,
    "mongo-wire": _wire,
    "postgres": _postgres,
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


# -- helpers for the contract tests ------------------------------------------------------

START = CLOCK_START
"""Where every contract test's clock starts (whole milliseconds: MongoDB stores ms)."""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def recorder(clock: ManualClock) -> Recorder:
    return Recorder(clock)
