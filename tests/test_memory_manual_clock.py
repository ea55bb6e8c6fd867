"""InMemoryScheduler under a ManualClock: no threads, and ``advance`` returns only after
every item due by then was delivered, on the calling thread."""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind
from flowsched.delivery import Observer
from flowsched.port import SchedulerUnavailable

TIMER = ScheduleKind.TIMER
START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def stack_depth() -> int:
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def flowsched_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("flowsched-")]


def test_no_start_and_no_threads_needed(clock):
    before = flowsched_threads()
    s = InMemoryScheduler(clock=clock)
    seen: list[str] = []
    s.subscribe(TIMER, lambda item, attempt: seen.append(threading.current_thread().name))
    s.schedule(ScheduleItem("t", TIMER, START + timedelta(seconds=1)))
    with s:
        clock.advance(timedelta(seconds=1))
        assert flowsched_threads() == before
    assert seen == [threading.current_thread().name]


def test_items_a_handler_schedules_within_the_window_fire_in_the_same_advance(clock):
    s = InMemoryScheduler(clock=clock)
    seen: list[str] = []

    def chain(item: ScheduleItem, attempt: int) -> None:
        seen.append(item.id)
        if item.id == "first":
            s.schedule(ScheduleItem("now", TIMER, clock.now()))
            s.schedule(ScheduleItem("next-minute", TIMER, clock.now() + timedelta(minutes=1)))

    s.subscribe(TIMER, chain)
    s.schedule(ScheduleItem("first", TIMER, START + timedelta(seconds=1)))
    clock.advance(timedelta(seconds=5))
    assert seen == ["first", "now"]
    clock.advance(timedelta(minutes=1))
    assert seen == ["first", "now", "next-minute"]


def test_a_handler_that_advances_the_clock_does_not_recurse(clock):
    s = InMemoryScheduler(clock=clock)
    seen: list[tuple[str, int]] = []

    def advancing(item: ScheduleItem, attempt: int) -> None:
        seen.append((item.id, attempt))
        if item.id == "a":
            clock.advance(timedelta(seconds=10))  # re-entrant: must not deliver "a" again
            raise RuntimeError("a fails after moving time")

    s.subscribe(TIMER, advancing)
    s.schedule(ScheduleItem("a", TIMER, START + timedelta(seconds=1)))
    s.schedule(ScheduleItem("b", TIMER, START + timedelta(seconds=8)))
    clock.advance(timedelta(seconds=1))

    # "b" fell due inside the window the handler opened: delivered before advance returned.
    assert seen == [("a", 0), ("b", 0)]
    assert s.get("a").due == clock.now() + timedelta(seconds=3)  # type: ignore[union-attr]


def test_a_handler_that_keeps_advancing_the_clock_runs_flat_not_nested(clock):
    s = InMemoryScheduler(clock=clock)
    ticks: list[int] = []
    depths: set[int] = set()

    def tick(item: ScheduleItem, attempt: int) -> None:
        depths.add(stack_depth())
        ticks.append(attempt)
        if len(ticks) < 1_500:  # more than the recursion limit, were it nested
            s.schedule(ScheduleItem("tick", TIMER, clock.now() + timedelta(seconds=1)))
            clock.advance(timedelta(seconds=1))

    s.subscribe(TIMER, tick)
    s.schedule(ScheduleItem("tick", TIMER, START))
    clock.advance(timedelta(0))

    assert ticks == [0] * 1_500
    assert len(depths) == 1, "each tick ran deeper in the stack than the one before"


def test_after_close_nothing_fires_and_schedule_refuses(clock):
    s = InMemoryScheduler(clock=clock)
    seen: list[str] = []
    s.subscribe(TIMER, lambda item, attempt: seen.append(item.id))
    s.schedule(ScheduleItem("t", TIMER, START + timedelta(seconds=1)))
    s.close()
    s.close()  # idempotent

    clock.advance(timedelta(seconds=5))
    assert s.run_due() == 0
    assert seen == []
    with pytest.raises(SchedulerUnavailable, match="closed"):
        s.schedule(ScheduleItem("u", TIMER, START))
    with pytest.raises(SchedulerUnavailable):
        s.start()


def test_close_waits_for_an_inline_delivery_on_another_thread(clock):
    s = InMemoryScheduler(clock=clock)
    started, release = threading.Event(), threading.Event()
    events: list[str] = []

    def slow(item: ScheduleItem, attempt: int) -> None:
        started.set()
        release.wait(20)
        events.append("handler returned")

    s.subscribe(TIMER, slow)
    s.schedule(ScheduleItem("t", TIMER, START))
    advancer = threading.Thread(target=clock.advance, args=(timedelta(0),))
    advancer.start()
    assert started.wait(20)

    closer = threading.Thread(target=lambda: (s.close(), events.append("close returned")))
    closer.start()
    closer.join(0.2)
    release.set()
    closer.join(20)
    advancer.join(20)
    assert events == ["handler returned", "close returned"]


def test_a_handler_may_close_its_own_scheduler(clock):
    s = InMemoryScheduler(clock=clock)
    seen: list[str] = []

    def closing(item: ScheduleItem, attempt: int) -> None:
        seen.append(item.id)
        s.close()

    s.subscribe(TIMER, closing)
    s.schedule(ScheduleItem("a", TIMER, START))
    s.schedule(ScheduleItem("b", TIMER, START))
    clock.advance(timedelta(0))
    assert seen == ["a"]


def test_a_failing_observer_changes_nothing(clock):
    class Broken(Observer):
        def completed(self, item: ScheduleItem, attempt: int) -> None:
            raise RuntimeError("metrics backend down")

    s = InMemoryScheduler(clock=clock, observer=Broken())
    seen: list[int] = []
    s.subscribe(TIMER, lambda item, attempt: seen.append(attempt))
    s.schedule(ScheduleItem("t", TIMER, START))
    clock.advance(timedelta(0))
    assert seen == [0]
    assert not s.exists("t")  # the handler returned: done, whatever the metrics say
    clock.advance(timedelta(seconds=3))
    assert seen == [0]


def test_pending_counts_scheduled_items(clock):
    s = InMemoryScheduler(clock=clock)
    s.subscribe(TIMER, lambda item, attempt: None)
    for i in range(5):
        s.schedule(ScheduleItem(f"t-{i}", TIMER, START + timedelta(seconds=i)))
    s.schedule(ScheduleItem("t-0", TIMER, START + timedelta(seconds=9)))  # a replacement
    assert s.pending() == 5
    clock.advance(timedelta(seconds=2))
    assert s.pending() == 3


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("workers", 0, "workers must be from 1 to 10000"),
        ("max_wait", timedelta(0), "max_wait must be positive"),
    ],
)
def test_bad_options_are_refused_by_name(option, value, message):
    with pytest.raises(ValueError, match=message):
        InMemoryScheduler(**{option: value})
