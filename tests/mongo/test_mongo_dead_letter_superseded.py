"""A schedule of an id supersedes its dead letter for good: once the new form has run and
gone, the old letter does not come back, and ``requeue`` cannot run the old form again (a
review found it did while the letters were left in place and hidden only while an item of
the id was stored)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import mongomock

from flowsched import ManualClock, MongoScheduler, RedeliveryPolicy, ScheduleItem, ScheduleKind


def test_a_superseded_dead_letter_stays_gone_after_the_new_form_ran() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    collection = mongomock.MongoClient(tz_aware=True).db.timers
    scheduler = MongoScheduler(collection, clock=clock, redelivery=RedeliveryPolicy(max_attempts=1))
    ran: list[object] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.payload or {}).get("v"))
        if (item.payload or {}).get("v") == 1:
            raise RuntimeError("v1 fails")

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    scheduler.start()
    try:
        scheduler.schedule(ScheduleItem("x", ScheduleKind.TIMER, clock.now(), payload={"v": 1}))
        clock.advance(timedelta(0))
        assert [d.item.id for d in scheduler.dead_letters()] == ["x"]
        scheduler.schedule(ScheduleItem("x", ScheduleKind.TIMER, clock.now(), payload={"v": 2}))
        clock.advance(timedelta(seconds=1))  # v2 runs and completes: x is gone
        assert ran == [1, 2] and not scheduler.exists("x")
        assert scheduler.dead_letters() == [], "the superseded letter came back"
        assert scheduler.requeue("x") is False, "requeue ran a superseded form again"
        clock.advance(timedelta(seconds=1))
        assert ran == [1, 2]
    finally:
        scheduler.close()
