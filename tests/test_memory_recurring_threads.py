"""A recurring item on the threaded InMemoryScheduler (SystemClock): ticks run on the worker
pool, each slot once, in order, each told the slot applied before it.

No timing assertions: the waits are on Events with generous timeouts.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from flowsched import InMemoryScheduler, Recurrence, ScheduleItem, ScheduleKind

PATIENCE = 30.0  # seconds an Event may take on a loaded 2-core machine


class Ticks:
    """Records (slot, previous) per tick; ``done`` is set after ``expected`` ticks."""

    def __init__(self, expected: int, fail_every: int = 0) -> None:
        self.seen: list[tuple[datetime, datetime | None]] = []
        self.expected = expected
        self.fail_every = fail_every
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, item: ScheduleItem, attempt: int) -> None:
        with self._lock:
            self.seen.append((item.due, item.previous))
            if len(self.seen) >= self.expected:
                self.done.set()
            if self.fail_every and len(self.seen) % self.fail_every == 0:
                raise RuntimeError("this tick fails (and counts)")


def run(ticks: Ticks) -> InMemoryScheduler:
    scheduler = InMemoryScheduler(workers=4)
    scheduler.subscribe(ScheduleKind.TIMER, ticks)
    with scheduler:
        scheduler.schedule_recurring("pulse", Recurrence.every(timedelta(milliseconds=20)))
        assert ticks.done.wait(PATIENCE), f"only {len(ticks.seen)} ticks"
    return scheduler


def assert_one_history(seen: list[tuple[datetime, datetime | None]]) -> None:
    slots = [slot for slot, _ in seen]
    assert len(set(slots)) == len(slots), "a slot ran twice"
    assert slots == sorted(slots)
    assert [previous for _, previous in seen] == [None, *slots[:-1]]


def test_ticks_on_the_worker_pool_apply_each_slot_once_in_order() -> None:
    ticks = Ticks(expected=10)
    scheduler = run(ticks)
    assert_one_history(ticks.seen)
    assert scheduler.get("pulse") is not None  # still scheduled after closing


def test_failing_ticks_count_and_the_schedule_goes_on() -> None:
    ticks = Ticks(expected=10, fail_every=3)
    run(ticks)
    assert_one_history(ticks.seen)
