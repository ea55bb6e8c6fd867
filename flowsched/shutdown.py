"""Internal: how long ``close()`` / ``aclose()`` wait for handlers in flight (every adapter).

A scheduler waits for its running handlers when it closes, so that their outcomes are
written. One hung handler would then hold the process's shutdown for ever (``with
scheduler:`` never exits, a FastAPI lifespan never ends). So the wait is bounded by the
scheduler's ``shutdown_timeout`` (a constructor setting and the
``ipf-scheduler.flowsched.shutdown-timeout`` key, default 30 s): past it, ``close()`` returns
and logs the ids of the items whose handlers were left running. Nothing is lost: a left
item's outcome is never written by this node's close, so on MongoDB its claim lapses
(the lease is no longer renewed) and another node, or the next start, delivers it again;
its late outcome, if the handler ever returns, is fenced like any stale one.

:class:`InFlight` is the register of running deliveries every adapter keeps (through its
:class:`~flowsched.delivery.DeliveryCore`); :func:`close_within` and :func:`aclose_within`
bound the two faces' close.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from flowsched.config.scheduler_settings import LONGEST_SETTING
from flowsched.records import ScheduleItem

if TYPE_CHECKING:
    from flowsched.delivery import DeliveryCore

__all__ = [
    "CANCEL_GRACE",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "InFlight",
    "aclose_within",
    "bounded_aclose",
    "bounded_close",
    "check_shutdown_timeout",
    "close_within",
    "end_task",
]

log = logging.getLogger("flowsched.shutdown")

DEFAULT_SHUTDOWN_TIMEOUT = timedelta(seconds=30)
"""How long a closing scheduler waits for its handlers in flight, unless told otherwise."""

_SHOWN_IDS = 20
"""Item ids named in the log line (the count says how many more)."""


def check_shutdown_timeout(value: object) -> timedelta:
    """``value`` if it is a positive ``timedelta`` of at most ``LONGEST_SETTING``; else
    ``TypeError`` / ``ValueError`` naming ``shutdown_timeout`` and the value."""
    if not isinstance(value, timedelta):
        raise TypeError(f"shutdown_timeout must be a timedelta (got {value!r})")
    if not timedelta(0) < value <= LONGEST_SETTING:
        raise ValueError(
            f"shutdown_timeout must be positive and at most {LONGEST_SETTING.days} days "
            f"(got {value})"
        )
    return value


class InFlight:
    """The deliveries running now. ``items``: the items whose handlers run on threads (one
    list append and one removal per delivery, atomic under the GIL: a few tens of
    nanoseconds on the firing path); ``tasks``: the asyncio tasks running a handler, with
    their item's id."""

    __slots__ = ("items", "tasks")

    def __init__(self) -> None:
        self.items: list[ScheduleItem] = []
        self.tasks: dict[asyncio.Task[Any], str] = {}

    def ids(self) -> list[str]:
        """The ids of the items whose handlers run now."""
        return [item.id for item in list(self.items)] + list(dict(self.tasks).values())


def _delivering_here(core: object) -> bool:
    """Whether the calling thread is inside a handler that ``core`` (a
    :class:`~flowsched.delivery.DeliveryCore`) called: a frame of its ``deliver`` is on this
    thread's stack. Walked only when a scheduler closes."""
    from flowsched.delivery import DeliveryCore

    code = DeliveryCore.deliver.__code__
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code and frame.f_locals.get("self") is core:
            return True
        frame = frame.f_back
    return False


def _left_running(owner: object, timeout: timedelta, ids: list[str]) -> None:
    shown = ", ".join(repr(item_id) for item_id in ids[:_SHOWN_IDS])
    more = f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
    log.warning(
        "%r closed after waiting its shutdown_timeout (%s) for handlers in flight; left "
        "running: %s%s (their claims lapse and they are delivered again)",
        owner,
        timeout,
        shown or "none",
        more,
        extra={"item_ids": ids},
    )


def close_within(
    close: Callable[[], None], timeout: timedelta, core: DeliveryCore, owner: object
) -> None:
    """Run ``close`` (a synchronous scheduler's whole close) and wait for it at most
    ``timeout``; past that, log the items left running (``core``'s deliveries in flight) and
    return (``close`` goes on in a daemon thread and ends when they do); ``owner``, the
    scheduler, is named in the log. An error ``close``
    raises in time is raised here.

    Called from a handler of ``core``, ``close`` runs inline, as it always has: it must know
    its caller to not wait for it."""
    if _delivering_here(core):
        close()
        return
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            close()
        except BaseException as exc:  # handed to the caller
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="flowsched-close", daemon=True).start()
    if not done.wait(timeout.total_seconds()):
        _left_running(owner, timeout, core.in_flight.ids())
        return
    if failure:
        raise failure[0]


CANCEL_GRACE = 1.0
"""Seconds an async scheduler's close waits, after cancelling the handlers still running at
its limit, for them to end (one that ignores its cancellation is left running)."""


async def aclose_within(
    aclose: Callable[[float], Awaitable[None]], limit: float, core: DeliveryCore, owner: object
) -> None:
    """Await ``aclose(limit)``, an async scheduler's close: it waits ``limit`` seconds for
    the handlers in flight, then cancels those still running (given back unsettled: an
    ``async def`` one ends, a thread is abandoned) and waits at most :data:`CANCEL_GRACE`
    for them. The items whose handlers were still running at ``limit`` are logged."""
    at_limit: list[str] = []
    snapshot = asyncio.get_running_loop().call_later(
        limit, lambda: at_limit.extend(core.in_flight.ids())
    )
    try:
        await aclose(limit)
    finally:
        snapshot.cancel()
    if at_limit:
        _left_running(owner, timedelta(seconds=limit), at_limit)


class _Closable(Protocol):
    _shutdown_timeout: timedelta
    _core: DeliveryCore


C = TypeVar("C", bound=Callable[..., None])
A = TypeVar("A", bound=Callable[..., Coroutine[Any, Any, None]])


def bounded_close(close: C) -> C:
    """Decorates a synchronous scheduler's ``close``: :func:`close_within` its
    ``_shutdown_timeout``, its deliveries in flight read from its ``_core``."""

    @functools.wraps(close)
    def bounded(self: _Closable) -> None:
        close_within(functools.partial(close, self), self._shutdown_timeout, self._core, self)

    return cast(C, bounded)


def bounded_aclose(aclose: A) -> A:
    """Decorates an async scheduler's ``aclose(*, timeout=None)``: ``timeout`` defaults to
    its ``_shutdown_timeout``, and :func:`aclose_within` logs the items left running."""

    @functools.wraps(aclose)
    async def bounded(self: _Closable, *, timeout: float | None = None) -> None:
        limit = self._shutdown_timeout.total_seconds() if timeout is None else timeout

        async def run(seconds: float) -> None:
            await aclose(self, timeout=seconds)

        await aclose_within(run, limit, self._core, self)

    return cast(A, bounded)


async def end_task(task: asyncio.Task[None]) -> None:
    """Cancel a background ``task`` and wait for its end; raise the error it died of, if any.

    A cancel of the caller is not swallowed here (``suppress(CancelledError)`` around
    ``await task`` did that). The task's loop should also test a stop flag the caller sets
    first: Python 3.11's ``asyncio.wait_for`` drops a cancel that meets the end of its own
    wait (cpython gh-86296), so a cancel alone may not end a loop."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.result()  # a stopped loop returns None
