"""Internal: push wake-up for ``AsyncMongoScheduler`` - a change stream on the async driver.

The same pipeline and the same reading of its events as the threaded
:class:`~flowsched.mongo.change_stream.WakeUp` (:data:`~flowsched.mongo.change_stream.PIPELINE`:
unclaimed-and-ready writes only); it rings the firing task's alarm when an item this node
handles is written. Polling stays the source of truth: a server without change streams
(standalone, mongomock) is polled only, and a broken stream is reopened after a backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pymongo.errors import OperationFailure, PyMongoError

from flowsched.mongo.change_stream import (
    _UNSUPPORTED,
    MAX_AWAIT,
    MIN_GAP,
    PIPELINE,
    REOPEN_AFTER,
    Wanted,
)
from flowsched.mongo.transient import OutageBackoff

__all__ = ["follow_changes"]

log = logging.getLogger("flowsched.mongo")


def wanted_change(change: Mapping[str, Any], wanted: Wanted) -> bool:
    """Whether ``change`` may make an item of this node due (an update without its
    document: yes, cheaply)."""
    document = change.get("fullDocument")
    return not isinstance(document, Mapping) or wanted(document)


async def follow_changes(
    collection: Any,
    ring: Callable[[], None],
    wanted: Wanted,
    poll: float,
    paused: Callable[[], bool] = lambda: False,
) -> None:
    """Watch ``collection`` until cancelled, calling ``ring()`` for every wanted change.

    While ``paused()`` (a wake-up could start no claim) the stream is left unread; after a
    pause of REOPEN_AFTER or more it is opened again from now with ``ring()`` at once, as
    the threaded :class:`~flowsched.mongo.change_stream.WakeUp` does (its module says why)."""
    watch = getattr(type(collection), "watch", None)
    if watch is None or not asyncio.iscoroutinefunction(watch):
        log.info("push wake-up unavailable on %r: polling only", collection)
        return
    backoff = OutageBackoff(first=0.5, cap=30.0)
    max_await_ms = int(min(poll, MAX_AWAIT.total_seconds()) * 1000)
    token: Any = None
    while True:
        try:
            stream = await collection.watch(
                PIPELINE, resume_after=token, max_await_time_ms=max_await_ms
            )
        except OperationFailure as exc:
            if exc.code in _UNSUPPORTED:
                log.info("push wake-up unavailable (%s): polling only", exc)
                return
            token = None
            await asyncio.sleep(backoff.next())
            continue
        except PyMongoError as exc:
            log.debug("push wake-up could not open: %s", exc)
            await asyncio.sleep(backoff.next())
            continue
        backoff.reset()
        if token is None:
            ring()  # opened from now: whatever was written before is found by a sweep
        try:
            while stream.alive:
                if paused():
                    paused_at = time.monotonic()
                    while paused():
                        await asyncio.sleep(MIN_GAP)
                    if time.monotonic() - paused_at >= REOPEN_AFTER:
                        token = None  # the burst's own writes are of no interest: from now
                        break
                change = await stream.try_next()
                token = stream.resume_token or token
                if change is not None and wanted_change(change, wanted):
                    ring()
                await asyncio.sleep(MIN_GAP)  # at most one getMore per MIN_GAP
        except PyMongoError as exc:
            log.warning("push wake-up interrupted, polling until it resumes: %s", exc)
            token = None
            await asyncio.sleep(backoff.next())
        finally:
            await stream.close()
