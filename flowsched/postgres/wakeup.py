"""Internal: LISTEN/NOTIFY - a node hears at once of a timer made due soon on another node.

The ``put`` and ``requeue`` statements send ``pg_notify('<table>_due', route)`` when the row
is due within the store's ``notify_within`` (PostgreSQL delivers it at commit). A listener
holds one dedicated connection (outside the pool: a pooled connection would drop its LISTEN
when given back) and calls ``on_wake(route)`` for each notification; after a lost
connection it reconnects with backoff and calls ``on_wake(None)`` (it may have missed some).

Polling stays the source of truth: a notification only shortens a node's wait, and a lost
one costs at most a poll interval.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from flowsched.shutdown import end_task

__all__ = ["AsyncListener", "Listener", "conninfo_of"]

log = logging.getLogger("flowsched.postgres")

_BACKOFF = (0.1, 0.2, 0.5, 1.0)  # a server back from a restart is heard again within 1 s


def conninfo_of(conninfo_or_pool: Any) -> str:
    """The connection string a listener connects with: the string itself, or a pool's."""
    if isinstance(conninfo_or_pool, str):
        return conninfo_or_pool
    conninfo = getattr(conninfo_or_pool, "conninfo", None)
    if not isinstance(conninfo, str):
        raise TypeError(f"no conninfo in {type(conninfo_or_pool).__name__}")
    return conninfo


def _listen(channel: str) -> sql.Composed:
    return sql.SQL("LISTEN {}").format(sql.Identifier(channel))


class _Listening:
    """What both listeners share: their arguments, and what they do once (re)connected and
    once the connection is lost; they differ only in how they wait."""

    def __init__(self, conninfo: str, channel: str, on_wake: Callable[[str | None], None]) -> None:
        self.conninfo = conninfo
        self.channel = channel
        self.on_wake = on_wake

    def _listening(self, failures: int) -> None:
        """Listening again after ``failures`` lost connections: wake the node if any."""
        if failures:
            self.on_wake(None)  # notifications may have been missed meanwhile

    def _lost(self, exc: psycopg.Error, failures: int) -> float:
        """Seconds to wait before reconnecting after the ``failures``-th lost connection
        (counted from 0); the loss is logged."""
        delay = _BACKOFF[min(failures, len(_BACKOFF) - 1)]
        log.warning(
            "flowsched: LISTEN %s lost (%s); polling goes on, retrying in %.1f s",
            self.channel,
            exc,
            delay,
        )
        return delay


class Listener(_Listening):
    """A thread that LISTENs on ``channel`` and calls ``on_wake(route)`` for each
    notification (``on_wake(None)`` after a reconnection). :meth:`stop` ends it."""

    _thread: threading.Thread | None = None

    def __init__(self, conninfo: str, channel: str, on_wake: Callable[[str | None], None]) -> None:
        super().__init__(conninfo, channel, on_wake)
        self._stop = threading.Event()

    def start(self) -> None:
        """Start listening (in a daemon thread)."""
        self._thread = threading.Thread(
            target=self._run, name=f"flowsched-listen-{self.channel}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening and close the connection (waits at most ``timeout`` seconds)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(_listen(self.channel))
                    self._listening(failures)
                    failures = 0
                    while not self._stop.is_set():
                        for notify in conn.notifies(timeout=0.5):
                            self.on_wake(notify.payload)
            except psycopg.Error as exc:
                self._stop.wait(self._lost(exc, failures))
                failures += 1


class AsyncListener(_Listening):
    """:class:`Listener` as an asyncio task (``on_wake`` is called in the loop)."""

    _task: asyncio.Task[None] | None = None
    _stopping = False

    def start(self) -> None:
        """Start listening (a task of the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        if self._task is not None:
            self._stopping = True  # ends the loop even if a layer below swallows the cancel
            await end_task(self._task)
            self._task = None

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
                async with conn:
                    await conn.execute(_listen(self.channel))
                    self._listening(failures)
                    failures = 0
                    async for notify in conn.notifies():
                        self.on_wake(notify.payload)
            except psycopg.Error as exc:
                await asyncio.sleep(self._lost(exc, failures))
                failures += 1
