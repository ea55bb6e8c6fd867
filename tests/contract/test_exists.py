"""exists() is true while an item is scheduled: before it fires, not after a successful one."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_exists_until_the_item_fired(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    assert not s.exists("t")
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5)))
    assert s.exists("t")

    clock.advance(timedelta(milliseconds=4999))
    fire(s)
    assert s.exists("t")
    assert recorder.ids == []

    clock.advance(timedelta(milliseconds=1))
    fire(s)
    assert recorder.ids == ["t"]
    assert not s.exists("t")
    assert s.get("t") is None


def test_get_returns_the_scheduled_item(make_scheduler, clock):
    s = make_scheduler(clock)
    due = clock.now() + timedelta(seconds=5)
    s.schedule(ScheduleItem("t", TIMER, due, flow_id="f", payload={"order": "o-1"}))

    got = s.get("t")
    assert got == ScheduleItem("t", TIMER, due, flow_id="f", payload={"order": "o-1"})
    assert s.get("missing") is None


def test_nothing_fires_before_the_clock_moves(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule(ScheduleItem("late", TIMER, clock.now() - timedelta(seconds=1)))
    assert recorder.ids == []

    clock.advance(timedelta(0))
    fire(s)
    assert recorder.ids == ["late"]


def test_due_items_fire_in_due_order(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    for item_id, seconds in (("c", 3), ("a", 1), ("d", 4), ("b", 2)):
        s.schedule(ScheduleItem(item_id, TIMER, clock.now() + timedelta(seconds=seconds)))

    clock.advance(timedelta(seconds=10))
    fire(s)
    assert recorder.ids == ["a", "b", "c", "d"]
