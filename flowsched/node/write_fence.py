"""Internal: the deadline a node scheduler's writes carry (CONTRACT section 15), written once
for both faces.

A store whose calls give up after ``op_timeout`` (it says so with an ``op_timeout``
attribute, as the PostgreSQL stores do) is sent the port's writes - ``schedule``'s ``put``,
``cancel``'s ``remove``, ``cancel_flow``'s ``remove_flow`` - with a ``deadline`` in the
store's clock: a write that reaches the store after it applies nothing. The deadline is the
store's time when the call began, **on the early side of its error bound**, plus
``op_timeout``; the call gives up no earlier than ``op_timeout`` after that, so by the time
its caller is told the outcome is unknown (``OutcomeUnknown``), the store's clock has passed
the deadline and the write can no longer apply: a late cancel never removes the newer form
another instance scheduled meanwhile.

The store's time, by the first that applies:

* the store's injected clock (``store.clock``, a :class:`~flowsched.Clock`: tests, a
  :class:`~flowsched.ManualClock`; the store compares with it too);
* the store's own measurement (``store.time``, a
  :class:`~flowsched.store.measured_clock.MeasuredClock`: its ``earliest()``);
* otherwise (a database compared in SQL, as PostgreSQL's ``statement_timestamp()``) this
  fence measures it: ``store.now()`` through a
  :class:`~flowsched.node.clock_filter.ClockFilter`, before the first write and once the
  last sample is older than :data:`REFRESH` seconds (a failed refresh keeps the samples it
  has, their error grown by the drift; with none, the write is not sent and the call raises
  the measurement's ``SchedulerUnavailable``).

A store with no ``op_timeout`` (the in-memory reference store) gets no deadline, and no
budget: the faces then call its ``remove``/``remove_flow`` directly, without
:meth:`WriteFence.bounded` (the same calls, minus the cost of opening a budget).

Each port write runs in :meth:`WriteFence.bounded`: its store calls (the measurement, the
write, a retry) share one ``op_timeout`` (:mod:`flowsched.store.call_budget`), and its
deadline is taken as of the call's start. A fenced cancel whose reply was lost
(``OutcomeUnknown``) is retried within that budget (:func:`cancel_again`): it answers
``True`` for a timer it removed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta

from flowsched.clock import Clock, capped
from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.node.clock_filter import ClockFilter
from flowsched.store.async_face import AsyncOver
from flowsched.store.call_budget import budget_left, call_budget
from flowsched.store.interface import AsyncTimerStore, TimerStore
from flowsched.store.measured_clock import MeasuredClock

__all__ = ["REFRESH", "WriteFence", "cancel_again", "cancel_again_async"]

REFRESH = 30.0
"""Seconds after which the fence measures the store's clock again (before a write)."""


class WriteFence:
    """The ``deadline`` of a node's writes to ``store`` (see the module); ``node`` is the
    node's clock (its monotonic clock carries the samples)."""

    def __init__(self, store: object, node: Clock) -> None:
        inner = store.sync if isinstance(store, AsyncOver) else store
        timeout = getattr(inner, "op_timeout", None)
        self.op_timeout = timeout if isinstance(timeout, timedelta) else None
        own, measured = getattr(inner, "clock", None), getattr(inner, "time", None)
        self._own = own if isinstance(own, Clock) else None
        self._measured = measured if isinstance(measured, MeasuredClock) else None
        self._node = node
        self._filter = ClockFilter()
        self._stale_at = 0.0
        self._lock = threading.Lock()

    @contextmanager
    def bounded(self, call: str | None = None) -> Iterator[float]:
        """A port call: its store calls end within ``op_timeout``
        (:mod:`flowsched.store.call_budget`); yields when it began (``time.monotonic()``),
        for :meth:`deadline`; ``call`` names the port call (a store gives up naming it). A
        write whose outcome is unknown is said so
        (``OutcomeUnknown``) once its deadline has passed, not before (:meth:`_unfenced`)."""
        began = time.monotonic()
        seconds = None if self.op_timeout is None else self.op_timeout.total_seconds()
        with call_budget(began, seconds, call):
            try:
                yield began
            except OutcomeUnknown:
                time.sleep(self._unfenced(began))
                raise

    @asynccontextmanager
    async def bounded_async(self, call: str | None = None) -> AsyncIterator[float]:
        """:meth:`bounded` on the asyncio face."""
        began = time.monotonic()
        seconds = None if self.op_timeout is None else self.op_timeout.total_seconds()
        with call_budget(began, seconds, call):
            try:
                yield began
            except OutcomeUnknown:
                await asyncio.sleep(self._unfenced(began))
                raise

    def _unfenced(self, began: float) -> float:
        """Seconds until the deadline of the call that began at ``began`` has surely passed
        in the store's time (``op_timeout`` after it began): a write given up sooner - a
        connection reset at once - could still reach the store and apply after its caller
        was told, and another instance's newer form with it. None with an injected clock
        (its time is not the host's: the store compares with it, and waiting moves nothing)."""
        if self.op_timeout is None or self._own is not None:
            return 0.0
        return max(began + self.op_timeout.total_seconds() - time.monotonic(), 0.0)

    def _known(self) -> tuple[bool, datetime | None]:
        """``(True, deadline)`` when no measurement is due, else ``(False, None)``."""
        timeout = self.op_timeout
        if timeout is None:
            return True, None
        if self._own is not None:
            return True, capped(self._own.now(), timeout)  # the year 9999: its last date
        if self._measured is not None:
            if self._measured.stale():  # never measured, or long ago: the store's now() first
                return False, None
            return True, capped(self._measured.earliest(), timeout)
        with self._lock:
            if self._filter.samples and self._node.monotonic() < self._stale_at:
                return True, self._from_samples()
        return False, None

    def _from_samples(self) -> datetime:
        assert self.op_timeout is not None
        node = self._node
        return capped(self._filter.earliest(node.monotonic(), node.now()), self.op_timeout)

    def _sending(self) -> tuple[float, datetime]:
        return self._node.monotonic(), self._node.now()

    def _measured_by(self, sending: tuple[float, datetime], server: datetime | None) -> datetime:
        """The deadline after a measurement sent at ``sending`` (node monotonic, wall):
        ``server`` answered, or ``None`` (it failed: the samples kept serve)."""
        with self._lock:
            if server is not None:
                received = self._node.monotonic()
                self._filter.add(sending[0], received, sending[1], server)
                self._stale_at = received + REFRESH
            return self._from_samples()

    def _after_measuring(
        self, sending: tuple[float, datetime], server: datetime | None
    ) -> datetime:
        """The deadline once the store's ``now()`` answered ``server`` (or failed): from
        the store's own measurement where it keeps one (its ``now()`` sampled it: a node
        whose clock is off the database's by more than ``op_timeout`` must not fence its
        first write by its own clock), else from this fence's samples."""
        if self._measured is not None:
            assert self.op_timeout is not None
            return capped(self._measured.earliest(), self.op_timeout)
        return self._measured_by(sending, server)

    def _failed(self, exc: SchedulerUnavailable) -> None:
        """A measurement failed: go on with the samples kept, or raise (nothing was sent)."""
        measured = self._measured
        if measured is not None:
            if not measured.filter.samples:
                raise exc
            measured.postpone()  # the samples kept serve, their error grown by the drift
            return
        with self._lock:
            if not self._filter.samples:
                raise exc

    def _at(self, deadline: datetime | None, began: float) -> datetime | None:
        """``deadline`` as of ``began``: less the time since (a measurement took it)."""
        if deadline is None or self._own is not None:
            return deadline  # an injected clock is read at the call, not estimated
        return deadline - timedelta(seconds=max(time.monotonic() - began, 0.0))

    def deadline(self, now: Callable[[], datetime], began: float) -> datetime | None:
        """The deadline of a write in the call that :meth:`bounded` began at ``began``
        (sync face; ``None``: none); ``now`` is the store's ``now``, called only to
        measure."""
        done, known = self._known()
        if done:
            return self._at(known, began)
        sending, server = self._sending(), None
        try:
            server = now()
        except SchedulerUnavailable as exc:
            self._failed(exc)
        return self._at(self._after_measuring(sending, server), began)

    async def deadline_async(
        self, now: Callable[[], Awaitable[datetime]], began: float
    ) -> datetime | None:
        """:meth:`deadline` on the asyncio face (``now`` is the async store's ``now``)."""
        done, known = self._known()
        if done:
            return self._at(known, began)
        sending, server = self._sending(), None
        try:
            server = await now()
        except SchedulerUnavailable as exc:
            self._failed(exc)
        return self._at(self._after_measuring(sending, server), began)


def _retry(deadline: datetime | None) -> bool:
    left = budget_left()
    return deadline is not None and (left is None or left > 0)


def cancel_again(
    store: TimerStore, item_id: str, deadline: datetime | None, unknown: OutcomeUnknown
) -> bool:
    """A fenced cancel's retry, within its call's budget, after an attempt whose reply was
    lost (``unknown``): ``True`` if the item is gone (removed by that attempt - or, the one
    inexact case, by another caller meanwhile) or this removes it (with the same
    ``deadline``); otherwise, or if the retry fails too, ``unknown`` is raised."""
    if _retry(deadline):
        try:
            if not store.exists(item_id) or store.remove(item_id, deadline=deadline):
                return True
        except SchedulerUnavailable:
            pass
    raise unknown


async def cancel_again_async(
    store: AsyncTimerStore, item_id: str, deadline: datetime | None, unknown: OutcomeUnknown
) -> bool:
    """:func:`cancel_again` on the asyncio face."""
    if _retry(deadline):
        try:
            if not await store.exists(item_id) or await store.remove(item_id, deadline=deadline):
                return True
        except SchedulerUnavailable:
            pass
    raise unknown
