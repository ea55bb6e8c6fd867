"""Internal: node heartbeats in ``<table>_nodes`` (``<collection>_nodes`` on MongoDB) - which
live node serves which routes, for every store with ``heartbeat`` and ``leave``.

A started node scheduler (PostgreSQL, MongoDB, either face) writes one row for itself every
``max(poll_interval, 1 s)``: its routes and an expiry three beats ahead (at least 5 s), so a
node that died without closing drops out of :meth:`PostgresTimerStore.live_nodes
<flowsched.postgres.PostgresTimerStore.live_nodes>` by itself; closing removes the row.
Nothing decides delivery here: claims never read the table. It tells operators which routes
no live node serves. A beat that fails (an outage) is skipped; the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from flowsched.errors import SchedulerUnavailable

__all__ = ["AsyncBeats", "Beats", "LiveNode", "beat_interval", "node_ttl"]


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
        self._thread = threading.Thread(
            target=self._run, name=f"flowsched-beat-{self.node}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop beating; remove the node's row if it ever beat."""
        if self._thread is None:
            return  # never started
        self._stop.set()
        self._thread.join(self.every + 5)
        with contextlib.suppress(SchedulerUnavailable):
            self.store.leave(self.node)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(SchedulerUnavailable):
                self.store.heartbeat(self.node, self.routes(), self.ttl)
            self._stop.wait(self.every)


class AsyncBeats(_Beat[_AsyncBeating]):
    """:class:`Beats` as an asyncio task."""

    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Beat now and every interval, in a task of the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop beating; remove the node's row if it ever beat."""
        if self._task is None:
            return  # never started
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        with contextlib.suppress(SchedulerUnavailable):
            await self.store.leave(self.node)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(SchedulerUnavailable):
                await self.store.heartbeat(self.node, self.routes(), self.ttl)
            await asyncio.sleep(self.every)
