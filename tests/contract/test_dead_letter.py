"""With ``max_attempts``, an item that failed that many times is set aside as a dead letter
(item, attempts, last error): listed, no longer scheduled, and re-queueable."""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy

TIMER = ScheduleKind.TIMER


def exhaust(make_scheduler, clock, recorder, fire, max_attempts=3):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=max_attempts))
    s.subscribe(TIMER, recorder)
    recorder.fail("t", times=max_attempts)
    s.schedule(ScheduleItem("t", TIMER, clock.now(), payload={"order": "o-1"}))
    clock.advance(timedelta(0))
    fire(s)
    for _ in range(max_attempts - 1):
        clock.advance(timedelta(seconds=30))
        fire(s)
    return s


def test_an_item_is_dead_lettered_after_max_attempts(make_scheduler, clock, recorder, fire):
    s = exhaust(make_scheduler, clock, recorder, fire)

    assert [d.attempt for d in recorder.deliveries] == [0, 1, 2]
    assert not s.exists("t")
    [dead] = s.dead_letters()
    assert dead.item.id == "t"
    assert dead.item.payload == {"order": "o-1"}
    assert dead.attempts == 3
    assert "handler failed for t" in dead.error

    clock.advance(timedelta(hours=1))
    fire(s)
    assert len(recorder.deliveries) == 3


def test_a_requeued_dead_letter_is_delivered_again_from_attempt_zero(
    make_scheduler, clock, recorder, fire
):
    s = exhaust(make_scheduler, clock, recorder, fire)

    assert s.requeue("t") is True
    assert s.exists("t")
    assert s.dead_letters() == []
    clock.advance(timedelta(0))
    fire(s)
    assert recorder.deliveries[-1].attempt == 0
    assert len(recorder.deliveries) == 4
    assert not s.exists("t")


def test_requeue_at_a_given_time(make_scheduler, clock, recorder, fire):
    s = exhaust(make_scheduler, clock, recorder, fire)

    assert s.requeue("t", due=clock.now() + timedelta(minutes=1)) is True
    clock.advance(timedelta(seconds=59))
    fire(s)
    assert len(recorder.deliveries) == 3
    clock.advance(timedelta(seconds=1))
    fire(s)
    assert len(recorder.deliveries) == 4


def test_requeue_of_an_unknown_id_is_false(make_scheduler, clock):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=2))
    assert s.requeue("nothing-here") is False


def test_without_max_attempts_nothing_is_dead_lettered(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    recorder.fail("t")
    s.schedule(ScheduleItem("t", TIMER, clock.now()))
    clock.advance(timedelta(0))
    fire(s)
    for _ in range(10):
        clock.advance(timedelta(seconds=30))
        fire(s)

    # Failures at 0, 3, 9, 21, 45 s, then every 30 s up to 285 s.
    assert len(recorder.deliveries) == 13
    assert s.dead_letters() == []
    assert s.exists("t")
