"""In memory, an item for a route nobody serves is set aside once (not looked at again on
every wake-up) and delivered as soon as a handler for it is registered."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind

PARKED = "no handler for route"


def test_an_unserved_item_is_set_aside_once_under_a_manual_clock(caplog):
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    scheduler = InMemoryScheduler(clock=clock)
    scheduler.create_single_timer("later", timedelta(seconds=1), "gamma")
    fired: list[str] = []

    with caplog.at_level(logging.INFO, logger="flowsched.memory"):
        for _ in range(5):
            clock.advance(timedelta(seconds=1))
            assert scheduler.run_due() == 0
    assert caplog.text.count(PARKED) == 1
    assert scheduler.exists("later") and scheduler.pending() == 1

    scheduler.register("gamma", lambda item, attempt: fired.append(item.id))
    clock.advance(timedelta(0))
    assert fired == ["later"] and not scheduler.exists("later")


def test_worker_threads_do_not_spin_on_an_unserved_item(caplog):
    fired = threading.Event()
    scheduler = InMemoryScheduler(max_wait=timedelta(milliseconds=20))
    with caplog.at_level(logging.INFO, logger="flowsched.memory"), scheduler:
        scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, scheduler.now(), handler="gamma"))
        time.sleep(0.2)  # ten wake-ups of the waiting worker
        assert scheduler.exists("t")
        scheduler.register("gamma", lambda item, attempt: fired.set())
        assert fired.wait(5)
    assert caplog.text.count(PARKED) == 1
