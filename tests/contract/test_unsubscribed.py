"""Items of a kind nobody subscribed to stay scheduled, and are delivered once a handler
subscribes."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind


def test_an_unhandled_kind_waits_for_its_handler(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(ScheduleKind.TIMER, recorder)
    s.schedule(ScheduleItem("retry", ScheduleKind.ACTION_RETRY, clock.now() + timedelta(seconds=1)))
    s.schedule(ScheduleItem("timer", ScheduleKind.TIMER, clock.now() + timedelta(seconds=1)))

    clock.advance(timedelta(seconds=5))
    fire(s)
    assert recorder.ids == ["timer"]
    assert s.exists("retry")

    s.subscribe(ScheduleKind.ACTION_RETRY, recorder)
    clock.advance(timedelta(0))
    fire(s)
    assert recorder.ids == ["timer", "retry"]
    assert not s.exists("retry")


def test_a_waiting_item_can_still_be_cancelled_or_replaced(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    kind = ScheduleKind.PROCESSING_TIMEOUT
    s.schedule(ScheduleItem("gone", kind, clock.now() + timedelta(seconds=1)))
    s.schedule(ScheduleItem("moved", kind, clock.now() + timedelta(seconds=1), payload={"v": 1}))
    clock.advance(timedelta(seconds=2))
    fire(s)

    assert s.cancel("gone") is True
    s.schedule(ScheduleItem("moved", kind, clock.now() + timedelta(seconds=10), payload={"v": 2}))
    s.subscribe(kind, recorder)
    clock.advance(timedelta(0))
    fire(s)
    assert recorder.ids == []

    clock.advance(timedelta(seconds=10))
    fire(s)
    assert [d.item.payload for d in recorder.deliveries] == [{"v": 2}]
