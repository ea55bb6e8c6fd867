"""A stale delivery never removes (or reschedules) the item that replaced it, and once
schedule or cancel has returned the old form is never delivered again."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_completion_of_a_replaced_form_keeps_the_replacement(make_scheduler, clock, fire):
    s = make_scheduler(clock)
    seen = []

    def handler(item, attempt):
        seen.append(item.key)
        if len(seen) == 1:  # while the first form is being delivered, replace it
            s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=10)))

    s.subscribe(TIMER, handler)
    first = s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=1)))
    clock.advance(timedelta(seconds=1))
    fire(s)

    assert seen == [first.key]
    assert s.exists("t"), "the stale completion removed the replacement"
    clock.advance(timedelta(seconds=10))
    fire(s)
    assert len(seen) == 2
    assert seen[1] != first.key
    assert not s.exists("t")


def test_failure_of_a_replaced_form_does_not_reschedule_it(make_scheduler, clock, fire):
    s = make_scheduler(clock)
    seen = []

    def handler(item, attempt):
        seen.append((item.key, attempt))
        if len(seen) == 1:
            s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=10)))
            raise RuntimeError("the old form fails after being replaced")

    s.subscribe(TIMER, handler)
    first = s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=1)))
    clock.advance(timedelta(seconds=1))
    fire(s)
    assert s.get("t").due == clock.now() + timedelta(seconds=10)  # type: ignore[union-attr]

    clock.advance(timedelta(seconds=3))  # when the old form would have been redelivered
    fire(s)
    assert seen == [(first.key, 0)]
    clock.advance(timedelta(seconds=7))
    fire(s)
    assert len(seen) == 2
    assert seen[1][1] == 0
    assert seen[1][0] != first.key


def test_a_handler_that_cancels_its_own_item_and_fails_is_not_redelivered(
    make_scheduler, clock, fire
):
    s = make_scheduler(clock)
    seen = []

    def handler(item, attempt):
        seen.append(item.id)
        s.cancel(item.id)
        raise RuntimeError("failed after cancelling")

    s.subscribe(TIMER, handler)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=1)))
    clock.advance(timedelta(seconds=1))
    fire(s)
    clock.advance(timedelta(minutes=5))
    fire(s)

    assert seen == ["t"]
    assert not s.exists("t")


def test_a_redelivery_waiting_for_its_time_is_replaced_cleanly(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("t", times=1)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=1), payload={"v": 1}))
    clock.advance(timedelta(seconds=1))
    fire(s)  # fails; redelivery due in 3 s

    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=5), payload={"v": 2}))
    clock.advance(timedelta(seconds=3))
    fire(s)
    assert len(recorder.deliveries) == 1
    clock.advance(timedelta(seconds=2))
    fire(s)
    assert [(d.item.payload, d.attempt) for d in recorder.deliveries] == [
        ({"v": 1}, 0),
        ({"v": 2}, 0),
    ]
