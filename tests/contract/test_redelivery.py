"""A handler that raises is redelivered with backoff: 3 s, doubling, capped at 30 s (both
settable); ``attempt`` counts earlier failures; a handler that returns completes the item."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy

TIMER = ScheduleKind.TIMER
MS = timedelta(milliseconds=1)


def walk_backoff(s, clock, recorder, fire, gaps_s):
    """Advance to 1 ms before each expected redelivery (nothing), then onto it (one more)."""
    for attempt, gap in enumerate(gaps_s, start=1):
        clock.advance(timedelta(seconds=gap) - MS)
        fire(s)
        assert len(recorder.deliveries) == attempt, f"redelivery {attempt} came early"
        clock.advance(MS)
        fire(s)
        assert len(recorder.deliveries) == attempt + 1, f"redelivery {attempt} missing"
        assert recorder.deliveries[-1].attempt == attempt


def test_failures_back_off_3_6_12_24_then_30_s(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("t")
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(seconds=1)))
    clock.advance(timedelta(seconds=1))
    fire(s)
    assert [d.attempt for d in recorder.deliveries] == [0]

    walk_backoff(s, clock, recorder, fire, [3, 6, 12, 24, 30, 30])
    assert s.exists("t")
    assert len({d.item.key for d in recorder.deliveries}) == 1  # one schedule, one key


def test_the_scheduled_due_time_moves_on_redelivery(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("t")
    s.schedule(ScheduleItem("t", TIMER, clock.now()))
    clock.advance(timedelta(0))
    fire(s)

    assert s.get("t").due == clock.now() + timedelta(seconds=3)  # type: ignore[union-attr]


def test_a_handler_that_recovers_completes_the_item(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("t", times=2)
    s.schedule(ScheduleItem("t", TIMER, clock.now()))
    clock.advance(timedelta(0))
    fire(s)
    walk_backoff(s, clock, recorder, fire, [3, 6])

    assert not s.exists("t")
    clock.advance(timedelta(minutes=5))
    fire(s)
    assert [d.attempt for d in recorder.deliveries] == [0, 1, 2]


def test_backoff_is_settable(make_scheduler, clock, recorder, fire):
    policy = RedeliveryPolicy(initial=timedelta(seconds=1), maximum=timedelta(seconds=4))
    s = make_scheduler(clock, redelivery=policy)
    s.subscribe(TIMER, recorder)
    recorder.fail("t")
    s.schedule(ScheduleItem("t", TIMER, clock.now()))
    clock.advance(timedelta(0))
    fire(s)

    walk_backoff(s, clock, recorder, fire, [1, 2, 4, 4])


def test_one_failing_item_does_not_hold_back_others(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("bad")
    s.schedule(ScheduleItem("bad", TIMER, clock.now() + timedelta(seconds=1)))
    s.schedule(ScheduleItem("good", TIMER, clock.now() + timedelta(seconds=2)))

    clock.advance(timedelta(seconds=2))
    fire(s)
    assert recorder.ids == ["bad", "good"]
    assert s.exists("bad")
    assert not s.exists("good")
