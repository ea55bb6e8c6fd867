"""Whatever a handler raises, and whatever an observer does, no item is lost or stuck:
``BaseException``s other than ``KeyboardInterrupt`` (``asyncio.CancelledError``,
``SystemExit``) are failed deliveries like any other, and observer errors change nothing."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from flowsched import ScheduleItem, ScheduleKind
from flowsched.delivery import Observer, RedeliveryPolicy

TIMER = ScheduleKind.TIMER


@pytest.mark.parametrize("error", [asyncio.CancelledError, SystemExit])
def test_a_base_exception_is_a_failed_delivery(make_scheduler, clock, fire, error):
    s = make_scheduler(clock, redelivery=RedeliveryPolicy(max_attempts=2))
    attempts: list[int] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        attempts.append(attempt)
        raise error()

    s.subscribe(TIMER, handler)
    s.schedule(ScheduleItem("t", TIMER, clock.now()))
    clock.advance(timedelta(0))
    fire(s)
    assert attempts == [0]
    assert s.exists("t")

    clock.advance(timedelta(seconds=3))
    fire(s)
    assert attempts == [0, 1]
    assert not s.exists("t")
    [dead] = s.dead_letters()
    assert (dead.item.id, dead.attempts) == ("t", 2)
    assert error.__name__ in dead.error


class Broken(Observer):
    def fired(self, item, attempt, lateness):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer down")

    def completed(self, item, attempt):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer down")

    def failed(self, item, attempt, error):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer down")


def test_a_failing_observer_changes_nothing(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock, observer=Broken())
    s.subscribe(TIMER, recorder)
    recorder.fail("bad", times=1)
    s.schedule(ScheduleItem("ok", TIMER, clock.now()))
    s.schedule(ScheduleItem("bad", TIMER, clock.now()))
    clock.advance(timedelta(0))
    fire(s)
    assert sorted(recorder.ids) == ["bad", "ok"]
    assert not s.exists("ok")
    assert s.exists("bad")

    clock.advance(timedelta(seconds=3))
    fire(s)
    assert [d.attempt for d in recorder.of("bad")] == [0, 1]
    assert not s.exists("bad")
