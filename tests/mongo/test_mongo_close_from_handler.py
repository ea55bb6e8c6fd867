"""``close()`` called from inside a handler (on a sweeper worker) does not fail: it waits for
the other running handlers, and the calling delivery's outcome is still written once its
handler returns. Real background sweeper; every wait is on an event."""

from __future__ import annotations

import threading
from datetime import timedelta

from mongo_nodes import WAIT, eventually

from flowsched.clock import SystemClock
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_close_from_a_handler_waits_for_the_others_and_writes_its_own_outcome(make, collection):
    scheduler = make(clock=SystemClock(), workers=2, poll_interval=timedelta(hours=1))
    other_running, release_other = threading.Event(), threading.Event()
    closed, returned = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        if item.id == "other":
            other_running.set()
            release_other.wait(WAIT)
            return
        assert other_running.wait(WAIT)
        try:
            scheduler.close()
        except BaseException as exc:  # the defect: RuntimeError('cannot join current thread')
            errors.append(exc)
        closed.set()
        returned.set()

    scheduler.subscribe(TIMER, handler)
    now = SystemClock().now()
    scheduler.schedule(ScheduleItem("other", TIMER, now))
    scheduler.schedule(ScheduleItem("closer", TIMER, now))
    scheduler.start()
    assert other_running.wait(WAIT)
    assert not closed.wait(0.3)  # close() is waiting for the other running handler
    release_other.set()
    assert returned.wait(WAIT)
    assert errors == []
    # Both outcomes are written: the other's by close(), the closer's after its handler.
    assert eventually(lambda: collection.count_documents({}) == 0)
