"""An observer is a bystander: one that raises changes neither the call that notified it
(``schedule``/``cancel`` return normally: the write happened) nor what other observers see."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.delivery import Observer, RedeliveryPolicy
from flowsched.observe import MetricsObserver, Observers
from flowsched.port import DeadLetter


class Raising(Observer):
    def scheduled(self, item: ScheduleItem) -> None:
        raise RuntimeError("scheduled")

    def cancelled(self, item_id: str) -> None:
        raise RuntimeError("cancelled")

    def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
        raise RuntimeError("fired")

    def completed(self, item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("completed")

    def failed(self, item: ScheduleItem, attempt: int, error: str) -> None:
        raise RuntimeError("failed")

    def dead_lettered(self, dead: DeadLetter) -> None:
        raise RuntimeError("dead_lettered")


def test_a_raising_observer_never_makes_schedule_or_cancel_raise(make_scheduler, clock) -> None:
    scheduler = make_scheduler(clock, observer=Raising())
    scheduler.schedule(ScheduleItem("a", ScheduleKind.TIMER, clock.now(), flow_id="f"))
    scheduler.schedule(ScheduleItem("b", ScheduleKind.TIMER, clock.now(), flow_id="f"))
    scheduler.schedule(ScheduleItem("c", ScheduleKind.TIMER, clock.now()))
    assert scheduler.cancel("c") is True
    assert scheduler.cancel_flow("f") == 2
    assert not any(scheduler.exists(item_id) for item_id in "abc")


def test_the_first_observer_raising_does_not_skip_the_others(make_scheduler, clock) -> None:
    metrics = MetricsObserver()
    scheduler = make_scheduler(
        clock,
        observer=Observers(Raising(), metrics),
        redelivery=RedeliveryPolicy(max_attempts=1),
    )
    scheduler.subscribe(
        ScheduleKind.TIMER, lambda item, attempt: 1 / 0 if item.id == "bad" else None
    )
    for item_id in ("ok", "bad", "gone"):
        scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, clock.now()))
    scheduler.cancel("gone")
    clock.advance(timedelta(seconds=1))

    m = metrics.snapshot()
    assert (m.scheduled, m.cancelled, m.fired, m.completed, m.failed, m.dead_lettered) == (
        3,
        1,
        2,
        1,
        1,
        1,
    )
