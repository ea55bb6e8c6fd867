"""Internal: the one rule for the "now" a node core is given — by both drivers and by the
node simulation.

The core judges everything in the **store's time** (due times, lease ends, its renewals and
polls), so it must be given the store's time, not the node's: on a host whose clock is off
the database's, the node's own clock would time renewals and polls wrongly. The rule, with
no I/O (a driver asks it at every turn):

* a store that measures its database's clock (``store.time``, a
  :class:`~flowsched.store.measured_clock.MeasuredClock`, as
  :class:`~flowsched.mongo.MongoTimerStore`): the best estimate of the database's time,
  carried on the node's monotonic clock since the last sample
  (:meth:`~flowsched.store.measured_clock.MeasuredClock.estimate`);
* a store with its own clock (``store.clock``, as
  :class:`~flowsched.store.MemoryTimerStore`): that clock;
* otherwise the driver's clock (a store that compares in its database and reports no
  clock: the node's time is the best it has).

An async face made by :func:`~flowsched.store.as_async` is looked through (``.sync``).
:mod:`flowsched.testing.node_simulation` gives its cores the same best estimate, from the
same :class:`~flowsched.node.clock_filter.ClockFilter`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from flowsched.clock import Clock, SystemClock
from flowsched.store.async_face import AsyncOver
from flowsched.store.measured_clock import MeasuredClock

__all__ = ["DatabaseTime", "claimable_at", "core_clock", "face_clock"]


def core_clock(store: object, clock: Clock) -> Callable[[], datetime]:
    """What "now" a core over ``store`` sees (see the module); ``clock`` is the driver's."""
    if isinstance(store, AsyncOver):
        store = store.sync
    measured = getattr(store, "time", None)
    if isinstance(measured, MeasuredClock):
        return measured.estimate
    own = getattr(store, "clock", None)
    if isinstance(own, Clock):
        return own.now
    return clock.now


def claimable_at(store: object) -> Callable[[datetime], datetime]:
    """When an item due at a given time can be claimed, on the core's clock (what a driver
    wakes by): a store that measures its database's clock takes an item only once the
    *earliest* the database's time can be has reached its due time - on the best estimate
    the core is given, the due time plus the error bound (a node woken at the due time
    itself would claim nothing and, not to spin, wait for its next poll). Else the due
    time itself."""
    if isinstance(store, AsyncOver):
        store = store.sync
    measured = getattr(store, "time", None)
    if not isinstance(measured, MeasuredClock):
        return lambda when: when

    def claimable(when: datetime) -> datetime:
        earliest = measured.earliest()  # first: the error read is never short
        return when + (measured.estimate() - earliest)

    return claimable


class DatabaseTime:
    """A :class:`~flowsched.Clock` that reads a database's time as a store measures it: the
    best estimate (within half the quickest recent round trip), with no I/O. Due times are
    counted from it; whether one has come is judged by the store, on the safe side of the
    error bound (never early)."""

    __slots__ = ("measured",)

    def __init__(self, measured: MeasuredClock) -> None:
        self.measured = measured

    def now(self) -> datetime:
        return self.measured.estimate()

    def monotonic(self) -> float:
        return self.measured.node.monotonic()

    def __repr__(self) -> str:
        return f"DatabaseTime({self.measured.node!r})"


def face_clock(store: object, clock: Clock | None) -> Clock:
    """The clock a node face counts due times from - a delay (``create_single_timer``), a
    redelivery's backoff, a recurring item's anchor - and reports its ``now()`` by:
    ``clock`` when one was given; else the database's time where the store measures it
    (MongoDB's ``time``, PostgreSQL's ``server_time``: :class:`DatabaseTime`), so that on a
    host whose clock is off "in 10 s" means 10 s by the clock that judges due; else this
    host's clock. (Waiting is the driver's, on the host's clock: :func:`core_clock`.)"""
    if clock is not None:
        return clock
    if isinstance(store, AsyncOver):
        store = store.sync
    for name in ("time", "server_time"):
        measured = getattr(store, name, None)
        if isinstance(measured, MeasuredClock):
            return DatabaseTime(measured)
    return SystemClock()
