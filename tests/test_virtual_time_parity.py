"""One big ``advance`` is the same as many small ones, on every adapter.

The scenario: a flow state invokes action A (3 retries, 1 s doubling, no jitter) and action B
(5 s timeout, whose event ends the flow), next to a plain timer whose handler fails twice
(redelivered after 3 s, then 6 s) and then schedules a follow-up timer. Run with one 30 s
advance and with thirty 1 s steps, on the in-memory adapter and on MongoDB (mongomock, and
the wire server): the four histories - every action call, state change, timer delivery and
the ``clock.now()`` each handler saw - are identical, and each handler saw its item's due
time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
import pytest

from flowsched import (
    ActionTimeoutEvent,
    FlowDomain,
    InMemoryScheduler,
    ManualClock,
    MongoScheduler,
    ScheduleItem,
    ScheduleKind,
    SchedulerPort,
    SchedulingConfig,
)
from flowsched.flow import ActionRequest, Flow, TimelineEntry

T0 = datetime(2026, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)
CONF = """
Payment.Working.A.max-retries = 3
Payment.Working.A.initial-retry-interval = 1s
Payment.Working.A.jitter-enabled = false
Payment.Working.B.timeout-duration = 5s
"""
PAYMENT = (
    Flow("Payment")
    .initial("Working", invokes=["A", "B"])
    .terminal("TimedOut")
    .on(ActionTimeoutEvent, in_state="Working", action="B", go_to="TimedOut")
)

History = list[tuple[str, ...]]
Factory = Callable[[ManualClock], SchedulerPort]


def run_scenario(factory: Factory, steps: list[timedelta]) -> History:
    clock = ManualClock(T0)
    scheduler = factory(clock)
    history: History = []

    def seen(*what: object) -> None:
        history.append((clock.now().isoformat(), *map(str, what)))

    def call(request: ActionRequest) -> None:
        seen("call", request.action, request.attempt)

    def record(entry: TimelineEntry) -> None:
        seen("timeline", entry.at.isoformat(), entry.what.value, entry.detail)

    failures = {"reminder": 2}

    def timer(item: ScheduleItem, attempt: int) -> None:
        seen("timer", item.id, attempt, item.due.isoformat())
        if failures.get(item.id, 0) > attempt:
            raise RuntimeError(f"{item.id} fails")
        if item.id == "reminder":
            scheduler.schedule(ScheduleItem("follow-up", ScheduleKind.TIMER, clock.now() + 2 * S))

    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_clock(clock)
        .with_flow(PAYMENT)
        .with_action_adapter("A", call)
        .with_action_adapter("B", call)
        .with_listener(record)
        .build()
    )
    scheduler.subscribe(ScheduleKind.TIMER, timer)
    scheduler.start()
    try:
        domain.start("Payment", "p-1")
        scheduler.schedule(ScheduleItem("reminder", ScheduleKind.TIMER, T0 + 2 * S))
        for step in steps:
            clock.advance(step)
        assert clock.now() == T0 + sum(steps, timedelta(0))
        instance = domain.instance("p-1")
        assert instance is not None
        seen("state", instance.state)
    finally:
        scheduler.close()
    return history


def memory(clock: ManualClock) -> SchedulerPort:
    return InMemoryScheduler(clock=clock)


def mongomock_factory(clock: ManualClock) -> SchedulerPort:
    return MongoScheduler(mongomock.MongoClient()["parity"]["timers"], clock=clock)


def wire_factory(db: Any) -> Factory:
    names = iter(range(100))
    return lambda clock: MongoScheduler(db[f"timers_{next(names)}"], clock=clock)


ONE_BIG = [30 * S]
ONE_SECOND_STEPS = [S] * 30


def test_one_big_advance_equals_one_second_steps_on_every_adapter(mongo_db: Any) -> None:
    wire = wire_factory(mongo_db)
    histories = {
        (name, label): run_scenario(factory, steps)
        for name, factory in (("memory", memory), ("mongomock", mongomock_factory), ("wire", wire))
        for label, steps in (("one 30 s advance", ONE_BIG), ("1 s steps", ONE_SECOND_STEPS))
    }
    reference = histories[("memory", "1 s steps")]
    for key, history in histories.items():
        assert history == reference, f"{key} differs from memory with 1 s steps"

    calls = [(at, action, attempt) for at, what, action, attempt, *_ in _of(reference, "call")]
    assert calls == [
        ("2026-01-01T00:00:00+00:00", "A", "1"),
        ("2026-01-01T00:00:00+00:00", "B", "1"),
        ("2026-01-01T00:00:01+00:00", "A", "2"),
        ("2026-01-01T00:00:03+00:00", "A", "3"),
    ], "A's retry due at 7 s must not run: B's timeout at 5 s ended the flow"
    timers = [
        (at, item_id, attempt, due) for at, _, item_id, attempt, due in _of(reference, "timer")
    ]
    assert timers == [
        ("2026-01-01T00:00:02+00:00", "reminder", "0", "2026-01-01T00:00:02+00:00"),
        ("2026-01-01T00:00:05+00:00", "reminder", "1", "2026-01-01T00:00:05+00:00"),
        ("2026-01-01T00:00:11+00:00", "reminder", "2", "2026-01-01T00:00:11+00:00"),
        ("2026-01-01T00:00:13+00:00", "follow-up", "0", "2026-01-01T00:00:13+00:00"),
    ]
    assert reference[-1] == ("2026-01-01T00:00:30+00:00", "state", "TimedOut")


def _of(history: History, what: str) -> list[tuple[str, ...]]:
    return [entry for entry in history if entry[1] == what]


@pytest.mark.parametrize("factory", [memory, mongomock_factory], ids=["memory", "mongomock"])
def test_a_handler_sees_its_due_time_and_the_clock_rests_at_the_target(factory: Factory) -> None:
    clock = ManualClock(T0)
    scheduler = factory(clock)
    seen: list[tuple[str, datetime]] = []
    scheduler.subscribe(
        ScheduleKind.TIMER, lambda item, attempt: seen.append((item.id, clock.now()))
    )
    scheduler.start()
    for item_id, offset in (("c", 9 * S), ("a", S), ("b", 4 * S)):
        scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, T0 + offset))
    assert clock.advance(20 * S) == T0 + 20 * S
    assert seen == [("a", T0 + S), ("b", T0 + 4 * S), ("c", T0 + 9 * S)]
    scheduler.close()


def test_two_schedulers_on_one_clock_interleave_in_due_order() -> None:
    clock = ManualClock(T0)
    first, second = InMemoryScheduler(clock=clock), mongomock_factory(clock)
    seen: list[tuple[str, datetime]] = []
    for scheduler in (first, second):
        scheduler.subscribe(
            ScheduleKind.TIMER, lambda item, attempt: seen.append((item.id, clock.now()))
        )
        scheduler.start()
    first.schedule(ScheduleItem("m-3", ScheduleKind.TIMER, T0 + 3 * S))
    second.schedule(ScheduleItem("d-2", ScheduleKind.TIMER, T0 + 2 * S))
    first.schedule(ScheduleItem("m-1", ScheduleKind.TIMER, T0 + S))
    clock.advance(10 * S)
    assert seen == [("m-1", T0 + S), ("d-2", T0 + 2 * S), ("m-3", T0 + 3 * S)]
    first.close()
    second.close()


@pytest.mark.parametrize("factory", [memory, mongomock_factory], ids=["memory", "mongomock"])
def test_an_item_of_a_kind_nobody_handles_does_not_stop_the_steps(factory: Factory) -> None:
    clock = ManualClock(T0)
    scheduler = factory(clock)
    seen: list[datetime] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: seen.append(clock.now()))
    scheduler.start()
    scheduler.schedule(ScheduleItem("waits", ScheduleKind.ACTION_RETRY, T0 + S))
    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, T0 + 2 * S))
    clock.advance(5 * S)
    assert seen == [T0 + 2 * S]
    assert scheduler.exists("waits")
    scheduler.close()


class Stuck:
    """A scheduler whose earliest item is one it never delivers (say, routed elsewhere)."""

    def __init__(self) -> None:
        self.later = [T0 + 3 * S]
        self.ran: list[int] = []

    def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        if after is None:
            return T0
        return min((t for t in self.later if after < t <= until), default=None)

    def run_due(self) -> int:
        self.ran.append(1)
        if self.later and self.later[0] <= clock_of[0].now():
            self.later.pop(0)
            return 1
        return 0


clock_of: list[ManualClock] = []


def test_an_item_a_scheduler_never_delivers_does_not_hide_its_later_ones() -> None:
    clock = ManualClock(T0)
    clock_of[:] = [clock]
    stuck = Stuck()
    clock.attach(stuck)
    clock.advance(10 * S)
    assert stuck.later == []  # the item at 3 s was delivered, behind the stuck one
    assert clock.now() == T0 + 10 * S
    assert len(stuck.ran) <= 4
