"""Internal: one delivery of a handler that has a time limit, on the event loop.

See :mod:`flowsched.handler_limits`: an ``async def`` handler is awaited for at most its
limit and cancelled there; a plain one runs on a thread of its own
(:class:`~flowsched.handler_limits.TimedThread`) that is abandoned at the limit, its late
outcome dropped. Either way the run is a :class:`~flowsched.handler_limits.HandlerTimedOut`
failure, redelivered by the handler's policy. Cancelled from outside (shutdown), a thread
still running raises :class:`~flowsched.async_delivery.StillRunning`, as an untimed one
does: its claim is not given back.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from datetime import timedelta

from flowsched.delivery import DeliveryCore, Outcome
from flowsched.handler_limits import HandlerTimedOut, TimedThread, wait_async
from flowsched.history import close_attempt, open_attempt
from flowsched.port import Handler
from flowsched.records import ScheduleItem

__all__ = ["run_timed"]


async def run_timed(
    core: DeliveryCore,
    handler: Handler,
    item: ScheduleItem,
    attempt: int,
    timeout: timedelta,
    awaited: bool,
) -> Outcome:
    """Deliver ``item`` to ``handler`` with the time limit ``timeout``; the outcome.

    Raises ``CancelledError`` only when this task is cancelled (no outcome: do not settle)."""
    from flowsched.async_delivery import StillRunning, cancelled_from_outside

    opened = open_attempt(core.journal, item, attempt)
    name = item.route.partition(":")[2]
    started = time.monotonic()
    thread: TimedThread | None = None
    try:
        if awaited:
            ran, result = await wait_async(_call(handler, item, attempt), timeout)
        else:
            thread = TimedThread(lambda: handler(item, attempt), name)
            ran = await thread.wait_async(timeout)
            result = thread.outcome() if ran else None
            thread = None if ran else thread
            if ran and result is not None and inspect.isawaitable(result):
                ran, result = await wait_async(result, timeout)
        if not ran:
            elapsed = timedelta(seconds=time.monotonic() - started)
            raise HandlerTimedOut(name, timeout, elapsed)
    except KeyboardInterrupt:
        raise
    except asyncio.CancelledError as exc:
        if cancelled_from_outside():
            if thread is not None:
                thread.abandon()
                raise StillRunning(f"{item.id!r}: its handler runs on in a thread") from exc
            raise
        return close_attempt(core.journal, opened, core.outcome(item, attempt, exc))
    except BaseException as exc:
        return close_attempt(core.journal, opened, core.outcome(item, attempt, exc))
    return close_attempt(core.journal, opened, core.outcome(item, attempt, None))


async def _call(handler: Handler, item: ScheduleItem, attempt: int) -> object:
    result = handler(item, attempt)
    if result is not None and inspect.isawaitable(result):
        return await result
    return result
