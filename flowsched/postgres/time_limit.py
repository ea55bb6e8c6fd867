"""Internal: a PostgreSQL call gives up after ``op_timeout`` even when the server never
answers (a partition, a reply lost on the way) - on both faces, the same way.

psycopg has no client-side limit on a statement's wait (``statement_timeout`` counts on the
server, from when a statement *arrives*), and cancelling an asyncio task inside a psycopg
wait asks the server to cancel and waits for it again (up to 10 s more). So the call's
connection is **cut** when its time is up: its socket is shut down (``shutdown(2)`` on a
duplicate of its descriptor), which wakes the wait at once with a broken connection. A cut
connection is closed, never handed back to the pool for another call.

The limit covers the wait for a pooled connection too: :class:`CallLimit` is started when
the call begins, and the statements get what is left of ``op_timeout``. The sync face
shares one watchdog thread (:data:`WATCHDOG`) among all calls (a heap of deadlines: no
thread per call); the asyncio face uses ``loop.call_later``.

The error of a call that gave up (:func:`given_up`): :class:`~flowsched.OutcomeUnknown` for a
write (its statement was sent: it may or may not have taken effect - a fenced write that
reaches the server later applies nothing, see :mod:`flowsched.node.write_fence`),
:class:`~flowsched.SchedulerUnavailable` for a read.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.store.call_budget import budget_left

__all__ = ["WATCHDOG", "CallLimit", "Cut", "Watchdog", "given_up"]


class Cut:
    """Shut down one connection's socket, once, unless :meth:`finish` came first: the fence
    between the two is a lock, so a descriptor is never touched after its call finished
    (it may belong to another connection by then)."""

    __slots__ = ("_done", "_fd", "_lock", "fired")

    def __init__(self, conn: Any) -> None:
        self._fd: int = conn.fileno()
        self._lock = threading.Lock()
        self._done = False
        self.fired = False

    def __call__(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            # A duplicate of the descriptor: closing it leaves the connection's own;
            # shutting it down ends the connection for both.
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self._fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> bool:
        """Whether the connection was cut (then its caller closes it: the pool must not
        hand it out again)."""
        with self._lock:
            self._done = True
        return self.fired


class Watchdog:
    """One daemon thread that runs each :class:`Cut` at its monotonic time, unless it is
    finished first (started on first use; a heap, so a call costs a push, not a thread)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Cut]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, at: float, cut: Cut) -> None:
        with self._wake:
            heapq.heappush(self._due, (at, next(self._order), cut))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="flowsched-pg-watchdog", daemon=True
                )
                self._thread.start()
            if self._due[0][2] is cut:
                self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._due or self._due[0][0] > time.monotonic():
                    wait = self._due[0][0] - time.monotonic() if self._due else None
                    self._wake.wait(wait)
                now = time.monotonic()
                due = []
                while self._due and self._due[0][0] <= now:
                    due.append(heapq.heappop(self._due)[2])
            for cut in due:
                cut()  # a finished cut does nothing


WATCHDOG = Watchdog()
"""The sync face's one watchdog."""


def given_up(what: str, write: bool, limit: float) -> SchedulerUnavailable:
    """The error of a call that had no reply within ``limit`` seconds (see the module)."""
    if write:
        return OutcomeUnknown(
            f"PostgreSQL: {what}: no reply within {limit:g} s (op_timeout); the write "
            "may or may not have taken effect"
        )
    return SchedulerUnavailable(f"PostgreSQL: {what}: no reply within {limit:g} s (op_timeout)")


class CallLimit:
    """``op_timeout`` for one call, counted from its start (``None``: no limit), or the end
    of the port call's budget (:mod:`flowsched.store.call_budget`) when that comes first."""

    __slots__ = ("_end", "limit")

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        now = time.monotonic()
        self._end = None if limit is None else now + limit
        left = budget_left()  # the port call's own budget, when it ends sooner
        if left is not None and (self._end is None or now + left < self._end):
            self._end = now + left

    def left(self) -> float | None:
        """Seconds left (at least a millisecond), or ``None``: no limit."""
        if self._end is None:
            return None
        return max(self._end - time.monotonic(), 0.001)

    @contextmanager
    def on(self, conn: Any, what: str, write: bool) -> Iterator[None]:
        """Cut ``conn`` if the block is still running when the limit is up (sync face);
        then the block's error becomes :func:`given_up`'s."""
        if self._end is None:
            yield
            return
        cut = Cut(conn)
        WATCHDOG.add(self._end, cut)
        try:
            with self._given_up_if(cut, what, write):
                yield
        finally:
            if cut.finish():
                conn.close()  # cut (even as it answered): never handed out again

    @asynccontextmanager
    async def on_async(self, conn: Any, what: str, write: bool) -> AsyncIterator[None]:
        """:meth:`on` for an asyncio connection (the cut is a ``loop.call_later``)."""
        if self._end is None:
            yield
            return
        cut = Cut(conn)
        handle = asyncio.get_running_loop().call_later(self.left() or 0, cut)
        try:
            with self._given_up_if(cut, what, write):
                yield
        finally:
            handle.cancel()
            if cut.finish():
                await conn.close()

    @contextmanager
    def _given_up_if(self, cut: Cut, what: str, write: bool) -> Iterator[None]:
        """Both faces: the block's error becomes :func:`given_up`'s if ``cut`` fired."""
        try:
            yield
        except Exception as exc:
            if cut.finish():
                raise given_up(what, write, self.limit or 0) from exc
            raise
