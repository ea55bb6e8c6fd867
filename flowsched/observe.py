"""Metrics for any scheduler adapter: counts, lateness, and fan-out to several observers.

:class:`MetricsObserver` keeps thread-safe counters and a lateness summary in process (no
dependency); ``flowsched.metrics_prometheus`` exports the same events to Prometheus.

>>> from flowsched import InMemoryScheduler
>>> metrics = MetricsObserver()
>>> scheduler = InMemoryScheduler(observer=metrics)
>>> metrics.snapshot().scheduled
0
"""

from __future__ import annotations

import logging
import math
import random
import threading
from dataclasses import dataclass
from datetime import timedelta

from flowsched.delivery import Observer
from flowsched.records import DeadLetter, ScheduleItem

__all__ = ["Lateness", "Metrics", "MetricsObserver", "Observers"]

log = logging.getLogger("flowsched.observe")


@dataclass(frozen=True, slots=True)
class Lateness:
    """Fire time minus due time, in seconds, over the deliveries seen.

    ``p50``/``p99`` come from a uniform sample of at most ``reservoir`` deliveries (exact
    while fewer were seen); ``count`` and ``max`` are exact."""

    count: int
    max: float
    p50: float
    p99: float


@dataclass(frozen=True, slots=True)
class Metrics:
    """A consistent snapshot of a :class:`MetricsObserver`."""

    scheduled: int
    cancelled: int
    fired: int
    completed: int
    failed: int
    dead_lettered: int
    lateness: Lateness
    late_completions: int = 0
    """Runs that completed after their claim's lease ended (MongoDB; not failures)."""
    timed_out: int = 0
    """Runs past their handler's time limit (``register(..., timeout=)``; also failures)."""


class MetricsObserver(Observer):
    """Counts scheduler events and summarises lateness; thread-safe, cheap per event.

    ``reservoir`` bounds the memory used for percentiles (Vitter's algorithm R, drawing from
    ``rng``), so a scheduler that runs for months does not grow it.
    """

    def __init__(self, reservoir: int = 10_000, rng: random.Random | None = None) -> None:
        if reservoir < 1:
            raise ValueError(f"MetricsObserver reservoir must be >= 1 (got {reservoir})")
        self._lock = threading.Lock()
        self._rng = rng or random.Random()
        self._size = reservoir
        self._sample: list[float] = []
        self._max = 0.0
        self._scheduled = self._cancelled = self._fired = 0
        self._completed = self._failed = self._dead = self._late = 0
        self._timed_out = 0

    def scheduled(self, item: ScheduleItem) -> None:
        with self._lock:
            self._scheduled += 1

    def cancelled(self, item_id: str) -> None:
        with self._lock:
            self._cancelled += 1

    def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
        seconds = lateness.total_seconds()
        with self._lock:
            self._fired += 1
            if seconds > self._max or self._fired == 1:
                self._max = seconds
            if len(self._sample) < self._size:
                self._sample.append(seconds)
            else:
                slot = self._rng.randrange(self._fired)
                if slot < self._size:
                    self._sample[slot] = seconds

    def completed(self, item: ScheduleItem, attempt: int) -> None:
        with self._lock:
            self._completed += 1

    def failed(self, item: ScheduleItem, attempt: int, error: str) -> None:
        with self._lock:
            self._failed += 1

    def dead_lettered(self, dead: DeadLetter) -> None:
        with self._lock:
            self._dead += 1

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        with self._lock:
            self._late += 1

    def timed_out(self, item: ScheduleItem, attempt: int, elapsed: timedelta) -> None:
        with self._lock:
            self._timed_out += 1

    def snapshot(self) -> Metrics:
        """All counts and the lateness summary, taken at one instant."""
        with self._lock:
            sample = sorted(self._sample)
            return Metrics(
                scheduled=self._scheduled,
                cancelled=self._cancelled,
                fired=self._fired,
                completed=self._completed,
                failed=self._failed,
                dead_lettered=self._dead,
                lateness=Lateness(
                    count=self._fired,
                    max=self._max,
                    p50=_percentile(sample, 0.50),
                    p99=_percentile(sample, 0.99),
                ),
                late_completions=self._late,
                timed_out=self._timed_out,
            )


def _percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 when empty)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class Observers(Observer):
    """Send every event to several observers in turn (say, in-process metrics and Prometheus).

    Each observer is called on its own: one that raises is logged and does not keep the
    others from seeing the event."""

    def __init__(self, *observers: Observer) -> None:
        self._observers = observers

    def _each(self, hook: str, *args: object) -> None:
        for observer in self._observers:
            try:
                getattr(observer, hook)(*args)
            except Exception:
                log.exception("observer %s.%s failed (ignored)", type(observer).__name__, hook)

    def scheduled(self, item: ScheduleItem) -> None:
        self._each("scheduled", item)

    def cancelled(self, item_id: str) -> None:
        self._each("cancelled", item_id)

    def fired(self, item: ScheduleItem, attempt: int, lateness: timedelta) -> None:
        self._each("fired", item, attempt, lateness)

    def completed(self, item: ScheduleItem, attempt: int) -> None:
        self._each("completed", item, attempt)

    def failed(self, item: ScheduleItem, attempt: int, error: str) -> None:
        self._each("failed", item, attempt, error)

    def dead_lettered(self, dead: DeadLetter) -> None:
        self._each("dead_lettered", dead)

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        self._each("late_completion", item, attempt, late)

    def timed_out(self, item: ScheduleItem, attempt: int, elapsed: timedelta) -> None:
        self._each("timed_out", item, attempt, elapsed)
