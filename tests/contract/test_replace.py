"""Scheduling again under one id replaces the earlier schedule: only the latest form fires."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_a_later_replacement_moves_the_deadline(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=10), payload={"v": 1}))
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=20), payload={"v": 2}))

    clock.advance(timedelta(seconds=10))
    fire(s)
    assert recorder.ids == []
    assert s.exists("t")

    clock.advance(timedelta(seconds=10))
    fire(s)
    assert [d.item.payload for d in recorder.deliveries] == [{"v": 2}]
    assert not s.exists("t")


def test_an_earlier_replacement_fires_once_and_the_old_time_brings_nothing(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=20)))
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5)))

    clock.advance(timedelta(seconds=5))
    fire(s)
    assert recorder.ids == ["t"]

    clock.advance(timedelta(seconds=60))
    fire(s)
    assert recorder.ids == ["t"]


def test_each_schedule_gets_its_own_generation_and_key(make_scheduler, clock):
    s = make_scheduler(clock)
    first = s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5)))
    second = s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5)))

    assert first.key != second.key
    assert second.key.startswith("t#")
    assert s.get("t") == second
    assert s.get("t").key == second.key  # type: ignore[union-attr]


def test_the_delivered_item_carries_the_key_schedule_returned(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    stored = s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=1)))

    clock.advance(timedelta(seconds=1))
    fire(s)
    assert [d.item.key for d in recorder.deliveries] == [stored.key]
