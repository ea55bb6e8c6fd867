"""On the system clock, timers fire on the schedulers' own threads and still move the flow.

No timing is asserted: the test waits (generously) for the outcome, never for a duration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from flowkit import FLOW, FraudCheckPassed, SchemeRulesValidated, credit_transfer

from flowsched import FlowDomain, InMemoryScheduler, SchedulingConfig, SystemClock
from flowsched.flow import Happened, TimelineEntry
from flowsched.port import SchedulerPort

CONF = """
Any.CheckingFraud.CheckFraud.timeout-duration = 300ms
Any.CheckingFraud.CheckFraud.max-retries = 1
Any.CheckingFraud.CheckFraud.initial-retry-interval = 100ms
"""


def _memory(request: pytest.FixtureRequest) -> SchedulerPort:
    return InMemoryScheduler(clock=SystemClock())


def _wire(request: pytest.FixtureRequest) -> SchedulerPort:
    from datetime import timedelta

    from flowsched import MongoScheduler

    db = request.getfixturevalue("mongo_db")
    return MongoScheduler(
        db["timers"], clock=SystemClock(), poll_interval=timedelta(milliseconds=50)
    )


SCHEDULERS: dict[str, Callable[[pytest.FixtureRequest], SchedulerPort]] = {
    "memory": _memory,
    "mongo-wire": _wire,
}


@pytest.fixture(params=list(SCHEDULERS))
def real_time_scheduler(request: pytest.FixtureRequest) -> Any:
    built = SCHEDULERS[request.param](request)
    with built:
        yield built


def test_an_unanswered_fraud_check_times_out_on_the_scheduler_threads(
    real_time_scheduler: SchedulerPort,
) -> None:
    timed_out = threading.Event()
    invoked: list[int] = []

    def listen(entry: TimelineEntry) -> None:
        if entry.flow_id == "tx-1" and entry.what == Happened.FINISHED:
            timed_out.set()

    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(real_time_scheduler)
        .with_flow(credit_transfer())
        .with_action_adapter("ValidateAgainstSchemeRules", lambda r: SchemeRulesValidated())
        .with_action_adapter("CheckFraud", lambda r: invoked.append(r.attempt))
        .with_listener(listen)
        .build()
    )
    domain.start(FLOW, "tx-1")
    domain.start(FLOW, "tx-2")
    domain.handle("tx-2", FraudCheckPassed())

    assert timed_out.wait(timeout=60)
    tx1, tx2 = domain.instance("tx-1"), domain.instance("tx-2")
    assert tx1 is not None and tx1.state == "FraudTimedOut"
    assert tx2 is not None and tx2.state == "Complete"
    assert sorted(invoked) == [1, 1, 2]  # tx-1: first + one retry; tx-2: first only
