"""Internal: clocks — wall time for due dates, a monotonic clock for waiting.

Every component takes a clock instead of calling :func:`datetime.now`, so that tests can
drive time by hand with :class:`ManualClock`.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Protocol, cast, runtime_checkable

__all__ = [
    "AsyncClockDriven",
    "Clock",
    "ClockDriven",
    "ManualClock",
    "SystemClock",
    "attach_if_manual",
    "detach_if_manual",
    "ensure_utc",
]


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


def later(now: datetime, delta: timedelta, what: str) -> datetime:
    """``now + delta``; ``ValueError`` naming ``what`` if that is past the year 9999."""
    try:
        return now + delta
    except OverflowError:
        raise ValueError(
            f"{what}: {delta} after {now.isoformat()} is past the year 9999 (the last date)"
        ) from None


LAST = datetime.max.replace(microsecond=999_000, tzinfo=UTC)
"""The last instant a lease, a wake-up or a heartbeat can end at (whole milliseconds, as BSON
keeps it): internal deadlines near the end of the year 9999 stop there."""


def capped(now: datetime, delta: timedelta) -> datetime:
    """``now + delta``, or :data:`LAST` if that is later (an internal deadline - a lease, a
    heartbeat, a wake-up - near the year 9999 ends at the last date instead of overflowing)."""
    try:
        return min(now + delta, LAST)
    except OverflowError:
        return LAST


def attach_if_manual(clock: object, scheduler: object) -> bool:
    """Attach ``scheduler`` to ``clock`` if the clock is stepped by hand (it has ``attach``,
    as :class:`ManualClock` has): its ``advance`` then drives the scheduler. Whether it is."""
    attach = getattr(clock, "attach", None)
    if not callable(attach):
        return False
    attach(scheduler)
    return True


def detach_if_manual(clock: object, scheduler: object) -> None:
    """Undo :func:`attach_if_manual`: ``clock`` stops driving ``scheduler`` (a closed one)."""
    detach = getattr(clock, "detach", None)
    if detach is not None:
        detach(scheduler)


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


class AsyncClockDriven(Protocol):
    """An asyncio scheduler that a :class:`ManualClock` drives through virtual time with
    :meth:`ManualClock.advance_async`: :class:`ClockDriven`'s two calls, as coroutines."""

    def next_due(
        self, until: datetime, after: datetime | None = None
    ) -> Awaitable[datetime | None]:
        """As :meth:`ClockDriven.next_due`."""
        ...

    def run_due(self) -> Awaitable[int]:
        """As :meth:`ClockDriven.run_due`, on the running event loop."""
        ...


Driven = ClockDriven | AsyncClockDriven


def _is_async(scheduler: Driven) -> bool:
    return inspect.iscoroutinefunction(scheduler.run_due)


class _Ask:
    """One question the stepping asks a scheduler: ``next_due(*args)``, or ``run_due()``
    when ``args`` is None (see :meth:`ManualClock._steps`)."""

    __slots__ = ("args", "scheduler")

    def __init__(
        self, scheduler: Driven, args: tuple[datetime, datetime | None] | None = None
    ) -> None:
        self.scheduler = scheduler
        self.args = args


def _next(steps: Generator[_Ask, object, None], answer: object) -> _Ask | None:
    """The next question of ``steps`` given ``answer`` to the last, or ``None`` at the end."""
    try:
        return steps.send(answer)
    except StopIteration:
        return None


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

    For asyncio schedulers (``AsyncInMemoryScheduler``, ``AsyncMongoScheduler``: see
    :class:`AsyncClockDriven`), ``await clock.advance_async(delta)`` does the same on the
    running event loop; plain ``advance`` refuses to run while one is attached (their
    handlers can only run on a loop). The stepping is written once (:meth:`_steps`) and
    driven by both.

    >>> clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    >>> clock.advance(timedelta(seconds=5)).isoformat()
    '2026-01-01T00:00:05+00:00'
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = ensure_utc(start, "ManualClock start") if start else datetime.now(UTC)
        self._origin = self._now
        self._lock = threading.Lock()
        self._listeners: list[Callable[[datetime], None]] = []
        self._driven: list[Driven] = []
        # Whether the current thread (or asyncio task, or a handler run for it in a worker
        # thread: a context var follows all three) is stepping this clock.
        self._stepping: ContextVar[bool] = ContextVar(f"flowsched-stepping-{id(self)}")

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return (self._now - self._origin).total_seconds()

    def advance(self, delta: timedelta) -> datetime:
        """Move time forward by ``delta`` (not negative), delivering every item that falls
        due on the way at its due time (see the class docstring); return the new now."""
        target = self._target(delta)
        if self._stepping.get(False):
            return self._move_to(target)  # from a handler: the running step delivers
        with self._lock:
            waiting = [s for s in self._driven if _is_async(s)]
        if waiting:
            raise TypeError(
                f"ManualClock.advance: {waiting[0]!r} is an asyncio scheduler, whose handlers "
                "run on an event loop: use `await clock.advance_async(delta)`"
            )
        with self._stepped(target) as steps:
            answer: object = None
            while (ask := _next(steps, answer)) is not None:
                assert not _is_async(ask.scheduler)  # refused above
                sync = cast(ClockDriven, ask.scheduler)
                answer = sync.run_due() if ask.args is None else sync.next_due(*ask.args)
        return self._rest_at(target)

    async def advance_async(self, delta: timedelta) -> datetime:
        """:meth:`advance` for asyncio schedulers, on the running loop: every item due on the
        way delivered at its due time, in due order, follow-ups included (one big advance is
        the same as many small ones); synchronous schedulers attached to the clock are
        stepped too. Return the new now.

        A handler may call it (or ``advance``) itself: time then just moves, and the step
        already running delivers what falls due."""
        target = self._target(delta)
        if self._stepping.get(False):
            return self._move_to(target)
        with self._stepped(target) as steps:
            answer: object = None
            while (ask := _next(steps, answer)) is not None:
                scheduler = ask.scheduler
                call = scheduler.run_due() if ask.args is None else scheduler.next_due(*ask.args)
                answer = await call if inspect.isawaitable(call) else call
        return self._rest_at(target)

    def _target(self, delta: timedelta) -> datetime:
        """Where an advance by ``delta`` ends (``ValueError`` for a step back)."""
        if delta < timedelta(0):
            raise ValueError(f"ManualClock cannot go backwards (advance by {delta})")
        return later(self.now(), delta, "ManualClock.advance")

    @contextmanager
    def _stepped(self, target: datetime) -> Iterator[Generator[_Ask, object, None]]:
        """The steps to ``target``, with this context marked as stepping while they run."""
        token = self._stepping.set(True)
        try:
            yield self._steps(target)
        finally:
            self._stepping.reset(token)

    def _rest_at(self, target: datetime) -> datetime:
        """The end of an advance: time rests at ``target``; the listeners are told."""
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
        return self._move_to(later(self.now(), delta, "ManualClock.jump"))

    def attach(self, scheduler: Driven) -> None:
        """Let :meth:`advance` drive ``scheduler`` (schedulers call this themselves)."""
        with self._lock:
            if not any(s is scheduler for s in self._driven):
                self._driven.append(scheduler)

    def detach(self, scheduler: Driven) -> None:
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

    def _steps(self, target: datetime) -> Generator[_Ask, object, None]:
        """Step to ``target``, in due order and each at its due time, delivering everything
        due by then: a generator that yields each question to a scheduler (an :class:`_Ask`)
        and is sent its answer, so that :meth:`advance` and :meth:`advance_async` drive
        one algorithm (no I/O here).

        A scheduler that ran at the current instant and delivered nothing (its earliest item
        is one it cannot deliver, such as one for a route nobody handles here) is asked only
        for items after that instant, until something is delivered: so the loop always ends."""
        instant = self.now()
        idle: list[Driven] = []
        while True:
            with self._lock:
                driven = list(self._driven)
            earliest: datetime | None = None
            ready: list[Driven] = []
            for scheduler in driven:
                waiting = any(s is scheduler for s in idle)
                due = yield _Ask(scheduler, (target, instant if waiting else None))
                assert due is None or isinstance(due, datetime)
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
                if (yield _Ask(scheduler)):
                    idle = []
                elif not any(s is scheduler for s in idle):
                    idle.append(scheduler)
