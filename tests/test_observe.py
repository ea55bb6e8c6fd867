"""MetricsObserver counts what a scheduler does and summarises lateness (fire - due)."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta

import pytest

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy
from flowsched.observe import MetricsObserver, Observers

TIMER = ScheduleKind.TIMER
START = datetime(2026, 1, 1, tzinfo=UTC)


def test_counts_follow_the_scheduler():
    clock = ManualClock(START)
    metrics = MetricsObserver()
    s = InMemoryScheduler(
        clock=clock, observer=metrics, redelivery=RedeliveryPolicy(max_attempts=2)
    )
    s.subscribe(TIMER, lambda item, attempt: None if item.id != "bad" else 1 / 0)
    for item_id in ("ok-1", "ok-2", "bad", "gone"):
        s.schedule(ScheduleItem(item_id, TIMER, START + timedelta(seconds=1)))
    s.cancel("gone")
    clock.advance(timedelta(seconds=1))
    clock.advance(timedelta(seconds=3))

    m = metrics.snapshot()
    assert (m.scheduled, m.cancelled, m.fired, m.completed, m.failed, m.dead_lettered) == (
        4,
        1,
        4,
        2,
        2,
        1,
    )


def test_lateness_is_fire_time_minus_due_time():
    clock = ManualClock(START)
    metrics = MetricsObserver()
    s = InMemoryScheduler(clock=clock, observer=metrics)
    s.subscribe(TIMER, lambda item, attempt: None)
    for ms in range(1, 101):  # due at 1..100 ms, all fired at 100 ms: 99..0 ms late
        s.schedule(ScheduleItem(f"t-{ms}", TIMER, START + timedelta(milliseconds=ms)))
    clock.jump(timedelta(milliseconds=100))  # as if down meanwhile: nothing fires on the way
    clock.advance(timedelta(0))

    late = metrics.snapshot().lateness
    assert late.count == 100
    assert late.max == pytest.approx(0.099)
    assert late.p50 == pytest.approx(0.049)
    assert late.p99 == pytest.approx(0.098)


def test_the_reservoir_bounds_memory_but_keeps_count_and_max_exact():
    metrics = MetricsObserver(reservoir=100, rng=random.Random(7))
    item = ScheduleItem("t", TIMER, START)
    for ms in range(10_000):
        metrics.fired(item, 0, timedelta(milliseconds=ms))

    late = metrics.snapshot().lateness
    assert late.count == 10_000
    assert late.max == pytest.approx(9.999)
    assert 2.5 < late.p50 < 7.5  # a uniform sample of 0..10 s: the median is near 5 s
    assert len(metrics._sample) == 100


def test_counts_are_exact_under_concurrent_events():
    metrics = MetricsObserver()
    item = ScheduleItem("t", TIMER, START)

    def hammer() -> None:
        for _ in range(5_000):
            metrics.fired(item, 0, timedelta(0))
            metrics.completed(item, 0)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m = metrics.snapshot()
    assert (m.fired, m.completed, m.lateness.count) == (20_000, 20_000, 20_000)


def test_observers_fan_out_every_event():
    clock = ManualClock(START)
    first, second = MetricsObserver(), MetricsObserver()
    s = InMemoryScheduler(clock=clock, observer=Observers(first, second))
    s.subscribe(TIMER, lambda item, attempt: None)
    s.schedule(ScheduleItem("t", TIMER, START))
    clock.advance(timedelta(0))

    assert first.snapshot() == second.snapshot()
    assert first.snapshot().completed == 1


def test_a_bad_reservoir_size_is_refused():
    with pytest.raises(ValueError, match="reservoir must be >= 1"):
        MetricsObserver(reservoir=0)


def test_late_completions_are_counted_and_fanned_out():
    first, second = MetricsObserver(), MetricsObserver()
    fan = Observers(first, second)
    fan.late_completion(ScheduleItem("t", TIMER, START), 0, timedelta(seconds=3))
    assert first.snapshot().late_completions == second.snapshot().late_completions == 1
    assert first.snapshot().failed == 0
