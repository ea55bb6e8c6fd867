"""Whatever an observer does, no item is lost or stuck: observer errors change nothing.
(That a handler's ``CancelledError`` or ``SystemExit`` is a failed delivery like any other is
part of ``check_scheduler_port``.)"""

from __future__ import annotations

from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.delivery import Observer

TIMER = ScheduleKind.TIMER


class Broken(Observer):
    def fired(self, item, attempt, lateness):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer down")

    def completed(self, item, attempt):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer down")

    def failed(self, item, attempt, error):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer down")


def test_a_failing_observer_changes_nothing(make_scheduler, clock, recorder):
    s = make_scheduler(clock, observer=Broken())
    s.subscribe(TIMER, recorder)
    recorder.fail("bad", times=1)
    s.schedule(ScheduleItem("ok", TIMER, clock.now()))
    s.schedule(ScheduleItem("bad", TIMER, clock.now()))
    clock.advance(timedelta(0))
    assert sorted(recorder.ids) == ["bad", "ok"]
    assert not s.exists("ok")
    assert s.exists("bad")

    clock.advance(timedelta(seconds=3))
    assert [d.attempt for d in recorder.of("bad")] == [0, 1]
    assert not s.exists("bad")
