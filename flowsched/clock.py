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

__all__ = ["Clock", "ManualClock", "SystemClock", "ensure_utc"]


def ensure_utc(value: datetime, what: str = "datetime") -> datetime:
    """Return ``value`` in UTC; reject naive datetimes (their meaning depends on the host)."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"{what} must be timezone-aware (got naive {value.isoformat()})")
    return value.astimezone(UTC)


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


class ManualClock:
    """A clock that moves only when told to.

    Schedulers built on it fire nothing until :meth:`advance` is called; an
    ``InMemoryScheduler`` has delivered every item due by the new time before ``advance``
    returns (it listens to the clock), a ``MongoScheduler`` does so on ``run_due()``.

    >>> clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    >>> clock.advance(timedelta(seconds=5)).isoformat()
    '2026-01-01T00:00:05+00:00'
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = ensure_utc(start, "ManualClock start") if start else datetime.now(UTC)
        self._origin = self._now
        self._lock = threading.Lock()
        self._listeners: list[Callable[[datetime], None]] = []

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return (self._now - self._origin).total_seconds()

    def advance(self, delta: timedelta) -> datetime:
        """Move time forward by ``delta`` (not negative), then notify listeners in order."""
        if delta < timedelta(0):
            raise ValueError(f"ManualClock cannot go backwards (advance by {delta})")
        with self._lock:
            self._now = self._now + delta
            now = self._now
            listeners = list(self._listeners)
        for listener in listeners:
            listener(now)
        return now

    def set(self, when: datetime) -> datetime:
        """Move time forward to ``when`` (not earlier than now)."""
        return self.advance(ensure_utc(when, "ManualClock.set") - self.now())

    def add_listener(self, listener: Callable[[datetime], None]) -> None:
        """Call ``listener(now)`` after every advance (schedulers use this to fire inline)."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[datetime], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def __repr__(self) -> str:
        return f"ManualClock({self.now().isoformat()})"
