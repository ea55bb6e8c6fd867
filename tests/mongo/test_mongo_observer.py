"""The observer hears every step of an item's life on MongoDB too."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched.delivery import Observer, RedeliveryPolicy
from flowsched.port import DeadLetter, ScheduleItem, ScheduleKind, SchedulerUnavailable


class Recorder(Observer):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def scheduled(self, item: ScheduleItem) -> None:
        self.events.append(("scheduled", item.id))

    def cancelled(self, item_id: str) -> None:
        self.events.append(("cancelled", item_id))

    def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
        self.events.append(("fired", item.id))

    def completed(self, item: ScheduleItem, attempt: int) -> None:
        self.events.append(("completed", item.id))

    def failed(self, item: ScheduleItem, attempt: int, error: str) -> None:
        self.events.append(("failed", item.id))

    def dead_lettered(self, dead: DeadLetter) -> None:
        self.events.append(("dead", dead.item.id))


def test_observer_sees_schedule_cancel_fire_fail_and_dead_letter(make, clock):
    observer = Recorder()
    scheduler = make(observer=observer, redelivery=RedeliveryPolicy(max_attempts=1))

    def handler(item: ScheduleItem, attempt: int) -> None:
        if item.id == "bad":
            raise RuntimeError("no")

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    for item_id, flow in [("ok", None), ("bad", None), ("f1", "flow"), ("f2", "flow")]:
        due = clock.now() if flow is None else clock.now() + timedelta(hours=1)
        scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, due, flow_id=flow))
    assert scheduler.cancel_flow("flow") == 2
    assert not scheduler.cancel("f1")
    scheduler.run_due()

    events = observer.events
    assert events[:4] == [("scheduled", i) for i in ("ok", "bad", "f1", "f2")]
    assert sorted(events[4:6]) == [("cancelled", "f1"), ("cancelled", "f2")]
    assert sorted(events[6:]) == sorted(
        [("fired", "ok"), ("completed", "ok"), ("fired", "bad"), ("failed", "bad"), ("dead", "bad")]
    )


def test_a_closed_scheduler_cannot_start_again(make):
    scheduler = make()
    scheduler.close()
    scheduler.close()  # idempotent
    with pytest.raises(SchedulerUnavailable, match="closed"):
        scheduler.start()
