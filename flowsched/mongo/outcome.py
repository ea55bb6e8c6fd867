"""Internal: writes whose outcome is unknown, and late writes that must apply nothing.

A call that gives up (``op_timeout``) after a write *may have been sent* - the connection
broke or timed out while the request was out, not before it left - cannot say whether the
write took effect: it raises :class:`~flowsched.OutcomeUnknown` (a ``SchedulerUnavailable``
whose message says so). ``SchedulerUnavailable`` alone means that no attempt reached the
server (no server could be selected, no connection was had) or that the server answered
with an error (nothing applied).

A write the server receives after its caller gave up applies nothing: ``cancel``,
``cancel_flow`` and the replacing ``schedule`` are fenced by :func:`write_deadline` - a time
no later than the database's clock when the caller gives up - against the ``stored_at`` of
the form they would change (:meth:`flowsched.mongo.store.TimerStore.fence`; every form is
stamped with a time never behind the database's clock), so a late cancel never removes, and a
late replace never overwrites, a form stored after its caller gave up. (``$$NOW`` in a
filter would fence on the server's own clock, but neither the wire server nor mongomock
evaluates it.)

``cancel()`` answers ``True`` for a timer it removed even when its first reply was lost: a
retry after an attempt that may have been applied (:func:`cancel_again_steps`) first looks
for the item; found, it is removed (fenced as before); gone, the cancel counts it as removed
by itself - the item no longer fires, which is what ``True`` promises. The one inexact case:
an item that was removed by another caller (or completed) while this cancel's lost reply was
out also answers ``True``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pymongo.errors import (
    ConnectionFailure,
    ExecutionTimeout,
    PyMongoError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WTimeoutError,
)

from flowsched.clock import Clock
from flowsched.mongo.commands import Call, Steps
from flowsched.mongo.server_clock import ServerClock
from flowsched.mongo.store import TimerStore
from flowsched.mongo.transient import within

__all__ = [
    "cancel_again_steps",
    "async_cancel_attempts",
    "call_within",
    "cancel_attempts",
    "maybe_applied",
    "measure_for_fence",
    "unknown_message",
    "write_deadline",
    "write_deadline_async",
]


T = TypeVar("T")


def maybe_applied(exc: PyMongoError) -> bool:
    """Whether a write that failed with ``exc`` may have taken effect: the request may have
    reached the server (a network error or time-out while it was out, a server time-out)."""
    if isinstance(exc, ServerSelectionTimeoutError | WaitQueueTimeoutError):
        return False  # no server, no connection: nothing was sent
    return isinstance(exc, ConnectionFailure | ExecutionTimeout | WTimeoutError)


def unknown_message(message: str) -> str:
    """A ``SchedulerUnavailable`` message (``... did not take effect within ...``) turned
    into what :class:`~flowsched.OutcomeUnknown` says: the write may or may not have."""
    return message.replace(
        "did not take effect within", "may or may not have taken effect: no reply within", 1
    )


def write_deadline(clock: Clock, op_timeout: timedelta) -> datetime | None:
    """The fence of a write its caller gives up on after ``op_timeout``: the database's
    time, never ahead of it (``ServerClock.earliest``), plus ``op_timeout`` - the caller
    gives up no earlier, so the database's clock has passed it by then. But never before
    ``latest + error``: every form stored before the call began (stamped ``latest`` then) is
    within the fence, however short ``op_timeout`` (then a form stored within about one error
    bound after the caller gave up may still be reached by its late write).

    ``None`` (no fence) while ``clock`` is not measured against the database (a
    ManualClock, ``server_time=False``, a server without ``localTime``): fences and stamps
    compare times from every node of a collection, so only the database's clock will do."""
    if not isinstance(clock, ServerClock) or not clock.measured:
        return None
    return max(clock.earliest() + op_timeout, clock.latest() + clock.error)


def measure_for_fence(clock: Clock, op_timeout: timedelta) -> None:
    """Measure ``clock`` against the database (one ``hello`` within ``op_timeout``) if it
    never was, before a write that carries a fence or a stamp: a node that only schedules
    and cancels, or a started node that serves no handler (it claims nothing, so it never
    measures), would otherwise send unstamped forms and unfenced deletes - a late cancel of
    such a node removed the newer form another instance had stored meanwhile."""
    if isinstance(clock, ServerClock) and not clock.measured:
        clock.measured_now(op_timeout)


async def write_deadline_async(
    clock: Clock, store: TimerStore, op_timeout: timedelta
) -> datetime | None:
    """:func:`write_deadline` on the asyncio face, after :func:`measure_for_fence` (one
    ``hello`` through ``store``'s database if ``clock`` was never measured)."""
    if isinstance(clock, ServerClock) and not clock.measured:
        await clock.measured_now_async(store.items.database.command, op_timeout)
    return write_deadline(clock, op_timeout)


def async_cancel_attempts(
    store: TimerStore, item_id: str, before: datetime | None
) -> tuple[Callable[[], Steps[bool]], Callable[[], Steps[bool]]]:
    """A cancel's first attempt (a delete fenced by ``before``, :func:`write_deadline_async`)
    and its retry after an attempt that may have been applied (:func:`cancel_again_steps`)."""
    return (
        lambda: store.delete_steps(item_id, before),
        lambda: cancel_again_steps(store, item_id, before),
    )


def cancel_attempts(
    store: TimerStore, item_id: str
) -> tuple[Callable[[datetime | None], bool], Callable[[datetime | None], bool]]:
    """:func:`async_cancel_attempts` for :func:`call_within`: each takes the fence."""
    return (
        lambda before: store.run(store.delete_steps(item_id, before)),
        lambda before: store.run(cancel_again_steps(store, item_id, before)),
    )


def call_within(
    store: TimerStore,
    clock: Clock,
    op_timeout: timedelta,
    what: str,
    operation: Callable[..., T],
    again: Callable[..., Any] | None = None,
    write: bool = False,
) -> T:
    """``operation()`` after the store's indexes, retried for ``op_timeout``
    (:func:`~flowsched.mongo.transient.within`; ``again`` after an attempt that may have been
    applied). A ``write`` is called with its fence, :func:`write_deadline` taken once, at
    the start: a retry is fenced as the first attempt."""
    if write:
        measure_for_fence(clock, op_timeout)
    before = write_deadline(clock, op_timeout) if write else None

    def bound(step: Callable[..., T]) -> Callable[[], T]:
        def run() -> T:
            store.ensure_indexes()
            return step(before) if write else step()

        return run

    retry = None if again is None else bound(again)
    return within(op_timeout, what, bound(operation), store.items, write=write, again=retry)


def cancel_again_steps(store: TimerStore, item_id: str, before: datetime | None) -> Steps[bool]:
    """A cancel's retry after an attempt that may have removed the item (see the module's
    docstring): ``True`` if the item is gone or this removes it."""
    found = yield Call("items", "find_one", (store.key(item_id), {"_id": 1}))
    if found is None:
        return True  # removed by the attempt whose reply was lost (or meanwhile: see above)
    return (yield from store.delete_steps(item_id, before))
