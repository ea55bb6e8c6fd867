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
import logging
import threading
from collections.abc import Awaitable, Callable
from datetime import timedelta

from flowsched.config.scheduler_settings import LONGEST_SETTING

__all__ = [
    "CANCEL_GRACE",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "InFlight",
    "aclose_within",
    "check_shutdown_timeout",
    "close_within",
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
    """The deliveries running now: ``(runner, item id)`` pairs, where the runner is the
    thread (its ident) or the asyncio task that runs the handler. Entering and leaving are
    one list append and one removal (atomic under the GIL): cheap on the firing path."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: list[tuple[object, str]] = []

    def ids(self) -> list[str]:
        """The ids of the items whose handlers run now, in the order they started."""
        return [item_id for _, item_id in list(self.runs)]

    def runs_on(self, runner: object) -> bool:
        """Whether ``runner`` (a thread ident or a task) is running a handler now."""
        return any(key == runner for key, _ in list(self.runs))


def _left_running(owner: str, timeout: timedelta, ids: list[str]) -> None:
    shown = ", ".join(repr(item_id) for item_id in ids[:_SHOWN_IDS])
    more = f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
    log.warning(
        "%s closed after waiting its shutdown_timeout (%s) for handlers in flight; left "
        "running: %s%s (their claims lapse and they are delivered again)",
        owner,
        timeout,
        shown or "none",
        more,
        extra={"item_ids": ids},
    )


def close_within(
    close: Callable[[], None], timeout: timedelta, in_flight: InFlight, owner: str
) -> None:
    """Run ``close`` (a synchronous scheduler's whole close) and wait for it at most
    ``timeout``; past that, log the items left running and return (``close`` goes on in a
    daemon thread and ends when they do). An error ``close`` raises in time is raised here.

    Called from a handler (the calling thread is delivering), ``close`` runs inline, as it
    always has: it must know its caller to not wait for it."""
    if in_flight.runs_on(threading.get_ident()):
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
        _left_running(owner, timeout, in_flight.ids())
        return
    if failure:
        raise failure[0]


CANCEL_GRACE = 1.0
"""Seconds an async scheduler's close waits, after cancelling the handlers still running at
its limit, for them to end (one that ignores its cancellation is left running)."""


async def aclose_within(
    aclose: Callable[[float], Awaitable[None]], limit: float, in_flight: InFlight, owner: str
) -> None:
    """Await ``aclose(limit)``, an async scheduler's close: it waits ``limit`` seconds for
    the handlers in flight, then cancels those still running (given back unsettled: an
    ``async def`` one ends, a thread is abandoned) and waits at most :data:`CANCEL_GRACE`
    for them. The items whose handlers were still running at ``limit`` are logged."""
    at_limit: list[str] = []
    snapshot = asyncio.get_running_loop().call_later(
        limit, lambda: at_limit.extend(in_flight.ids())
    )
    try:
        await aclose(limit)
    finally:
        snapshot.cancel()
    if at_limit:
        _left_running(owner, timedelta(seconds=limit), at_limit)
