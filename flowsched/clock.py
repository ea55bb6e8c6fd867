"""Internal: clocks — wall time for due dates, a monotonic clock for waiting.

Every component takes a clock instead of calling :func:`datetime.now`, so that tests can
drive time by hand with :class:`ManualClock`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ClockDriven", "ManualClock", "SystemClock", "ensure_utc"]


def ensure_utc(value: datetime, what: str = "datetime") -> datetime:
    """Return ``value`` in UTC; reject naive datetimes (their meaning depends on the host)."""
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime (got {value!r:.80})")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"{what} must be timezone-aware (got naive {value.isoformat()})")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # 0001-01-01T00:00+05:00 is in the year 0 in UTC (and 9999-12-31T23:00-05:00 in 10000).
        raise ValueError(
            f"{what} {value.isoformat()} is outside the range of UTC datetimes "
            "(0001-01-01 to 9999-12-31)"
        ) from None


@runtime_checkable
class Clock(Protocol):
    """What the schedulers need of time."""

    def now(self) -> datetime:
        """The current wall time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for waiting, not for due dates)."""
        ...


class SystemClock:
    """The real clock: :func:`datetime.now` in UTC and :func:`time.monotonic`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"


class ClockDriven(Protocol):
    """A scheduler that a :class:`ManualClock` drives through virtual time.

    Both adapters implement it; a third-party adapter implements it to behave like them
    under ``ManualClock.advance`` (see :meth:`ManualClock.attach`).
    """

    def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """The earliest due time, at or before ``until`` (and strictly after ``after`` when
        given), of an item this scheduler would deliver now; ``None`` if there is none.

        It may be in the past (an item already due). Answering an earlier time than the truth
        costs an extra step; answering a later one (or ``None``) skips deliveries."""
        ...

    def run_due(self) -> int:
        """Deliver every item due by the clock's now, on the calling thread; how many ran."""
        ...


class ManualClock:
    """A clock that moves only when told to: virtual time for tests.

    Schedulers built on it fire nothing until :meth:`advance` is called. ``advance`` steps
    through the window: it moves the clock to the earliest due time any attached scheduler
    reports (see :class:`ClockDriven`), has that scheduler deliver what is due, and repeats
    until nothing is due by the target, where the clock then rests. So one big advance is
    the same as many small ones: items are delivered in due order, a handler sees
    :meth:`now` equal to its item's due time, and whatever those deliveries schedule inside
    the window (a retry, a redelivery, a follow-up timer) is delivered too, before
    ``advance`` returns. An ``InMemoryScheduler`` attaches itself when built, a
    ``MongoScheduler`` when started.

    A handler may call ``advance`` itself: time then just moves (the step already running
    delivers what falls due). Advances from several threads at once are not ordered.
    :meth:`jump` moves time *without* delivering in between, as if the process had been down.

    >>> clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    >>> clock.advance(timedelta(seconds=5)).isoformat()
    '2026-01-01T00:00:05+00:00'
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = ensure_utc(start, "ManualClock start") if start else datetime.now(UTC)
        self._origin = self._now
        self._lock = threading.Lock()
        self._listeners: list[Callable[[datetime], None]] = []
        self._driven: list[ClockDriven] = []
        self._stepping = threading.local()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return (self._now - self._origin).total_seconds()

    def advance(self, delta: timedelta) -> datetime:
        """Move time forward by ``delta`` (not negative), delivering every item that falls
        due on the way at its due time (see the class docstring); return the new now."""
        if delta < timedelta(0):
            raise ValueError(f"ManualClock cannot go backwards (advance by {delta})")
        target = self.now() + delta
        if getattr(self._stepping, "active", False):
            return self._move_to(target)  # from a handler: the running step delivers
        self._stepping.active = True
        try:
            self._step_to(target)
        finally:
            self._stepping.active = False
        now = self._move_to(target)
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(now)
        return now

    def set(self, when: datetime) -> datetime:
        """Advance to ``when`` (not earlier than now)."""
        return self.advance(ensure_utc(when, "ManualClock.set") - self.now())

    def jump(self, delta: timedelta) -> datetime:
        """Move time forward by ``delta`` delivering nothing, as if every scheduler had been
        down meanwhile: what fell due is delivered on the next :meth:`advance` (even by
        ``timedelta(0)``) or ``run_due()``, at the new time."""
        if delta < timedelta(0):
            raise ValueError(f"ManualClock cannot go backwards (jump by {delta})")
        return self._move_to(self.now() + delta)

    def attach(self, scheduler: ClockDriven) -> None:
        """Let :meth:`advance` drive ``scheduler`` (schedulers call this themselves)."""
        with self._lock:
            if not any(s is scheduler for s in self._driven):
                self._driven.append(scheduler)

    def detach(self, scheduler: ClockDriven) -> None:
        """Stop driving ``scheduler`` (a closed scheduler detaches itself)."""
        with self._lock:
            self._driven = [s for s in self._driven if s is not scheduler]

    def add_listener(self, listener: Callable[[datetime], None]) -> None:
        """Call ``listener(now)`` after every advance, once the clock rests at its target."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[datetime], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def __repr__(self) -> str:
        return f"ManualClock({self.now().isoformat()})"

    def _move_to(self, when: datetime) -> datetime:
        """Set the time to ``when`` unless it is already later (time never goes back)."""
        with self._lock:
            if when > self._now:
                self._now = when
            return self._now

    def _step_to(self, target: datetime) -> None:
        """Deliver, in due order and each at its due time, everything due by ``target``.

        A scheduler that ran at the current instant and delivered nothing (its earliest item
        is one it cannot deliver, such as one for a route nobody handles here) is asked only
        for items after that instant, until something is delivered: so the loop always ends."""
        instant = self.now()
        idle: list[ClockDriven] = []
        while True:
            with self._lock:
                driven = list(self._driven)
            earliest: datetime | None = None
            ready: list[ClockDriven] = []
            for scheduler in driven:
                waiting = any(s is scheduler for s in idle)
                due = scheduler.next_due(target, instant if waiting else None)
                if due is None or due > target:
                    continue
                due = max(due, instant)
                if earliest is None or due < earliest:
                    earliest, ready = due, [scheduler]
                elif due == earliest:
                    ready.append(scheduler)
            if earliest is None:
                return
            if earliest > instant:
                idle = []
            instant = self._move_to(earliest)
            for scheduler in ready:
                if scheduler.run_due():
                    idle = []
                elif not any(s is scheduler for s in idle):
                    idle.append(scheduler)
