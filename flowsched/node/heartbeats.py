"""Internal: node heartbeats in ``<table>_nodes`` (``<collection>_nodes`` on MongoDB) - which
live node serves which routes, for every store with ``heartbeat`` and ``leave``.

A started node scheduler (PostgreSQL, MongoDB, either face) writes one row for itself every
``max(poll_interval, 1 s)``: its routes and an expiry three beats ahead (at least 5 s), so a
node that died without closing drops out of :meth:`PostgresTimerStore.live_nodes
<flowsched.postgres.PostgresTimerStore.live_nodes>` by itself; closing removes the row.
Nothing decides delivery here: claims never read the table. It tells operators which routes
no live node serves. A handler added (:meth:`Beats.poke`) beats at once: its route is listed
as served then, not at the next beat. A beat that fails (an outage, or a store that refuses
this node's settings) is skipped; the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from flowsched.errors import ConfigError, SchedulerUnavailable
from flowsched.shutdown import end_task

__all__ = ["AsyncBeats", "Beats", "LiveNode", "beat_interval", "node_ttl"]

SKIPPED = (SchedulerUnavailable, ConfigError)
"""What a beat (and the leave at close) skips: an outage, and a store that refuses this
node's settings (a bucket count that disagrees: its claims say why; ``close`` must not
raise for it)."""


@dataclass(frozen=True, slots=True)
class LiveNode:
    """A node as its last heartbeat described it."""

    node_id: str
    routes: tuple[str, ...]
    renewed_at: datetime
    expires_at: datetime


def beat_interval(poll_interval: timedelta) -> timedelta:
    """How often a node beats: every poll, at most once a second."""
    return max(poll_interval, timedelta(seconds=1))


def node_ttl(poll_interval: timedelta) -> timedelta:
    """How long one beat says a node is alive: three beats, at least 5 s."""
    return max(3 * beat_interval(poll_interval), timedelta(seconds=5))


class _Beating(Protocol):
    def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> None: ...

    def leave(self, node: str) -> None: ...


class _AsyncBeating(Protocol):
    async def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> None: ...

    async def leave(self, node: str) -> None: ...


S = TypeVar("S", bound=_Beating | _AsyncBeating)


class _Beat(Generic[S]):
    """What both heartbeats share: their arguments and the beat's interval and ttl."""

    def __init__(
        self,
        store: S,
        node: str,
        routes: Callable[[], frozenset[str]],
        poll_interval: timedelta,
    ) -> None:
        self.store, self.node, self.routes = store, node, routes
        self.every = beat_interval(poll_interval).total_seconds()
        self.ttl = node_ttl(poll_interval)


class Beats(_Beat[_Beating]):
    """A daemon thread that beats for ``node`` (routes from ``routes()``) until :meth:`stop`,
    which removes the node's row."""

    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Beat now and every interval, in a daemon thread (once)."""
        if self._thread is not None:
            raise RuntimeError(f"the heartbeat of {self.node!r} has started already")
        self._stop = threading.Event()
        self._poked = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"flowsched-beat-{self.node}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop beating; remove the node's row if it ever beat."""
        if self._thread is None:
            return  # never started
        self._stop.set()  # a thread not running yet (closed from a handler during start) ends
        self._poked.set()
        if self._thread.is_alive():
            self._thread.join(self.every + 5)
        with contextlib.suppress(*SKIPPED):
            self.store.leave(self.node)

    def poke(self) -> None:
        """Beat now (the routes changed), not at the next interval; from any thread."""
        if self._thread is not None:
            self._poked.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(*SKIPPED):
                self.store.heartbeat(self.node, self.routes(), self.ttl)
            self._poked.wait(self.every)
            self._poked.clear()


class AsyncBeats(_Beat[_AsyncBeating]):
    """:class:`Beats` as an asyncio task."""

    _task: asyncio.Task[None] | None = None
    _stopping = False

    def start(self) -> None:
        """Beat now and every interval, in a task of the running loop."""
        self._loop = asyncio.get_running_loop()
        self._poked = asyncio.Event()
        self._task = self._loop.create_task(self._run())

    def poke(self) -> None:
        """Beat now (the routes changed), not at the next interval; from any thread."""
        if self._task is None or self._loop.is_closed():
            return
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            here = False
        if here:
            self._poked.set()
        else:
            self._loop.call_soon_threadsafe(self._poked.set)

    async def stop(self) -> None:
        """Stop beating; remove the node's row if it ever beat."""
        if self._task is None:
            return  # never started
        self._stopping = True  # ends the loop even if a layer below swallows the cancel
        await end_task(self._task)
        self._task = None
        with contextlib.suppress(*SKIPPED):
            await self.store.leave(self.node)

    async def _run(self) -> None:
        while not self._stopping:
            with contextlib.suppress(*SKIPPED):
                await self.store.heartbeat(self.node, self.routes(), self.ttl)
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancel that
            # meets the wait's own end (cpython gh-86296), and stop() then waited forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.every):
                    await self._poked.wait()
            self._poked.clear()
