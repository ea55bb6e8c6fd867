"""InMemoryScheduler in real time (SystemClock): one timer thread, a worker pool.

No timing assertions: every wait is on an Event with a generous timeout, so a loaded machine
makes these tests slower, never red.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import InMemoryScheduler, ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER
PATIENCE = 20.0  # seconds an Event may take on a loaded 2-core machine


def in_ms(ms: int) -> datetime:
    return datetime.now(UTC) + timedelta(milliseconds=ms)


class Collect:
    """A handler that records ids and sets an Event once it has seen ``expected`` of them."""

    def __init__(self, expected: int) -> None:
        self.ids: list[str] = []
        self.expected = expected
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, item: ScheduleItem, attempt: int) -> None:
        with self._lock:
            self.ids.append(item.id)
            if len(self.ids) >= self.expected:
                self.done.set()


@pytest.fixture
def make_threaded():
    built: list[InMemoryScheduler] = []

    def make(**options) -> InMemoryScheduler:
        s = InMemoryScheduler(**options)
        built.append(s)
        return s

    yield make
    for s in built:
        s.close()


def test_items_fire_in_due_order(make_threaded):
    s = make_threaded(workers=1)  # one worker: handlers run one at a time, in claim order
    seen = Collect(4)
    s.subscribe(TIMER, seen)
    for item_id, ms in (("c", 300), ("a", 100), ("d", 400), ("b", 200)):
        s.schedule(ScheduleItem(item_id, TIMER, in_ms(ms)))
    s.start()

    assert seen.done.wait(PATIENCE)
    assert seen.ids == ["a", "b", "c", "d"]


def test_an_earlier_item_wakes_the_sleeping_timer_thread(make_threaded):
    # max_wait of an hour: only the wake-up can make "soon" fire before the test gives up.
    s = make_threaded(max_wait=timedelta(hours=1))
    seen = Collect(1)
    s.subscribe(TIMER, seen)
    s.schedule(ScheduleItem("late", TIMER, in_ms(3_600_000)))
    s.start()
    threading.Event().wait(0.05)  # let the timer thread go to sleep on "late"

    s.schedule(ScheduleItem("soon", TIMER, in_ms(20)))
    assert seen.done.wait(PATIENCE)
    assert seen.ids == ["soon"]
    assert s.exists("late")


def test_close_waits_for_handlers_in_flight(make_threaded):
    s = make_threaded()
    started, release = threading.Event(), threading.Event()
    events: list[str] = []

    def slow(item: ScheduleItem, attempt: int) -> None:
        started.set()
        release.wait(PATIENCE)
        events.append("handler returned")

    s.subscribe(TIMER, slow)
    s.start()
    s.schedule(ScheduleItem("t", TIMER, in_ms(0)))
    assert started.wait(PATIENCE)

    closer = threading.Thread(target=lambda: (s.close(), events.append("close returned")))
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "close() returned while a handler was still running"
    release.set()
    closer.join(PATIENCE)
    assert events == ["handler returned", "close returned"]


def test_a_handler_can_schedule_and_cancel_on_its_own_scheduler(make_threaded):
    s = make_threaded()
    seen = Collect(2)

    def chain(item: ScheduleItem, attempt: int) -> None:
        seen(item, attempt)
        if item.id == "first":
            s.schedule(ScheduleItem("second", TIMER, in_ms(10)))
            s.cancel("never")

    s.subscribe(TIMER, chain)
    s.schedule(ScheduleItem("never", TIMER, in_ms(3_600_000)))
    s.start()
    s.schedule(ScheduleItem("first", TIMER, in_ms(10)))

    assert seen.done.wait(PATIENCE)
    assert seen.ids == ["first", "second"]
    assert not s.exists("never")


def test_a_replacement_made_while_the_old_form_runs_survives_it(make_threaded):
    s = make_threaded()
    running, release = threading.Event(), threading.Event()
    keys: list[str] = []
    second_done = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        keys.append(item.key)
        if len(keys) == 1:
            running.set()
            release.wait(PATIENCE)
        else:
            second_done.set()

    s.subscribe(TIMER, handler)
    s.start()
    first = s.schedule(ScheduleItem("t", TIMER, in_ms(0)))
    assert running.wait(PATIENCE)
    second = s.schedule(ScheduleItem("t", TIMER, in_ms(300)))
    release.set()

    assert second_done.wait(PATIENCE)
    assert keys == [first.key, second.key]


def test_a_burst_is_delivered_exactly_once_each(make_threaded):
    s = make_threaded(workers=4)
    n = 2_000
    seen = Collect(n)
    s.subscribe(TIMER, seen)
    for i in range(n):
        s.schedule(ScheduleItem(f"t-{i}", TIMER, in_ms(i % 200)))
    s.start()

    assert seen.done.wait(PATIENCE)
    assert sorted(seen.ids) == sorted(f"t-{i}" for i in range(n))
    assert s.pending() == 0


def test_run_due_delivers_on_the_calling_thread_without_start(make_threaded):
    s = make_threaded()
    threads: list[str] = []
    s.subscribe(TIMER, lambda item, attempt: threads.append(threading.current_thread().name))
    s.schedule(ScheduleItem("t", TIMER, in_ms(-1)))
    s.schedule(ScheduleItem("later", TIMER, in_ms(3_600_000)))

    assert s.run_due() == 1
    assert threads == [threading.current_thread().name]
    assert s.exists("later")


class JumpingClock:
    """Real time, except that the wall clock can be made to jump (NTP, a VM resumed)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def monotonic(self) -> float:
        return time.monotonic()


def test_a_forward_jump_fires_what_became_due_once(make_threaded):
    clock = JumpingClock()
    s = make_threaded(clock=clock, max_wait=timedelta(milliseconds=50))
    fired = Collect(3)
    s.subscribe(TIMER, fired)
    for i in range(3):
        s.schedule(ScheduleItem(f"h-{i}", TIMER, clock.now() + timedelta(hours=1, seconds=i)))
    s.schedule(ScheduleItem("tomorrow", TIMER, clock.now() + timedelta(days=1)))
    s.start()

    clock.offset = timedelta(hours=2)
    assert fired.done.wait(PATIENCE)
    assert sorted(fired.ids) == ["h-0", "h-1", "h-2"]
    assert s.exists("tomorrow")
    assert s.pending() == 1


def test_a_backward_jump_loses_nothing(make_threaded):
    clock = JumpingClock()
    s = make_threaded(clock=clock, max_wait=timedelta(milliseconds=50))
    fired = Collect(1)
    s.subscribe(TIMER, fired)
    s.schedule(ScheduleItem("t", TIMER, clock.now() + timedelta(milliseconds=200)))
    clock.offset = -timedelta(hours=1)
    s.start()

    assert not fired.done.wait(0.3)  # an hour early now: must not fire, must not be dropped
    assert s.exists("t")
    clock.offset = timedelta(0)
    assert fired.done.wait(PATIENCE)
    assert fired.ids == ["t"]


def test_blocking_handlers_run_in_parallel_up_to_the_pool_size(make_threaded):
    s = make_threaded(workers=4)
    together = threading.Barrier(4, timeout=PATIENCE)  # breaks unless 4 handlers overlap
    met = Collect(4)

    def blocking(item: ScheduleItem, attempt: int) -> None:
        together.wait()
        met(item, attempt)

    s.subscribe(TIMER, blocking)
    s.start()
    for i in range(4):
        s.schedule(ScheduleItem(f"t-{i}", TIMER, in_ms(0)))

    assert met.done.wait(PATIENCE)
    assert sorted(met.ids) == ["t-0", "t-1", "t-2", "t-3"]


def test_a_handler_may_close_the_running_scheduler(make_threaded):
    s = make_threaded()
    closed = threading.Event()

    def closing(item: ScheduleItem, attempt: int) -> None:
        s.close()
        closed.set()

    s.subscribe(TIMER, closing)
    s.start()
    s.schedule(ScheduleItem("t", TIMER, in_ms(0)))
    assert closed.wait(PATIENCE)
