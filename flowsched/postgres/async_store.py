"""Internal: ``AsyncPostgresTimerStore``, the :class:`~flowsched.store.AsyncTimerStore` on
PostgreSQL (public as ``flowsched.postgres.AsyncPostgresTimerStore``).

The twin of :class:`~flowsched.postgres.store.PostgresTimerStore`: the same plans
(:mod:`flowsched.postgres.operations`), run on a ``psycopg_pool.AsyncConnectionPool``. A
pool the store opens itself is opened, and the tables migrated, on the first call (a pool
belongs to the event loop it was opened in); ``await store.open()`` does it eagerly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from flowsched.node.heartbeats import LiveNode
from flowsched.postgres.connections import (
    check_conninfo,
    firing_async_pool,
    own_async_pool,
    pool_errors,
    probe_firing_async,
    settings_refused,
)
from flowsched.postgres.plans import Answered, Plan, ahead, run_async
from flowsched.postgres.schema import migrate_plan
from flowsched.postgres.store_base import StoreBase
from flowsched.postgres.time_limit import CallLimit
from flowsched.records import DeadLetter, ScheduleItem
from flowsched.steering import Attempt, TimerPage
from flowsched.store import Claim, QuarantinedRecord, Settlement, SettleResult, TimerSelection

__all__ = ["AsyncPostgresTimerStore"]

T = TypeVar("T")


class AsyncPostgresTimerStore(StoreBase[AsyncConnectionPool[Any]]):
    """Timers in a PostgreSQL table, for a node core's asyncio driver and the async port.

    The arguments are :class:`~flowsched.postgres.PostgresTimerStore`'s, with a
    ``psycopg_pool.AsyncConnectionPool`` (or a conninfo) for ``conninfo_or_pool``.

    >>> store = AsyncPostgresTimerStore("postgresql://app@db/app")  # doctest: +SKIP
    >>> await store.open()  # doctest: +SKIP
    """

    def _attach(
        self, conninfo_or_pool: str | AsyncConnectionPool[Any], pool_size: int, migrate: bool
    ) -> None:
        self._pool: AsyncConnectionPool[Any] | None = None
        self._conninfo: str | None = None
        if isinstance(conninfo_or_pool, AsyncConnectionPool):
            self._pool = conninfo_or_pool
        elif isinstance(conninfo_or_pool, psycopg.Connection) or hasattr(
            conninfo_or_pool, "getconn"
        ):
            raise TypeError(
                "AsyncPostgresTimerStore needs a psycopg_pool.AsyncConnectionPool or a "
                f"conninfo, got {type(conninfo_or_pool).__name__} (a synchronous pool: use "
                "PostgresTimerStore)"
            )
        else:
            self._conninfo = check_conninfo(conninfo_or_pool)
        self._owned = self._conninfo is not None
        self._size = pool_size
        self._migrate = migrate
        self._ready = False
        self._opening: asyncio.Lock | None = None
        self._firing: AsyncConnectionPool[Any] | None = None  # own pool: opened at first use
        self._firing_lock: asyncio.Lock | None = None
        self.version: int | None = None

    def __repr__(self) -> str:
        return f"AsyncPostgresTimerStore(table={self.table!r})"

    async def open(self) -> AsyncPostgresTimerStore:
        """Open the pool (if this store makes its own) and migrate the tables; idempotent."""
        if self._ready:
            return self
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._ready:
                return self
            if self._pool is None:
                assert self._conninfo is not None
                self._pool = await own_async_pool(self._conninfo, self._size, self._timeout)
            if self._migrate:
                plan = migrate_plan(self.setup.queries)
                self.version = await self._send(plan, f"migrate {self.table}", True, atomic=True)
            self._ready = True
        return self

    async def aclose(self) -> None:
        """Close the pool if this store opened it (a pool given is left to its owner)."""
        if self._owned and self._pool is not None:
            self._ready = False  # first: a call meanwhile opens the store again, whole
            firing, self._firing = self._firing, None
            if firing is not None and firing is not self._pool:
                await firing.close()
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> AsyncPostgresTimerStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        """The connection pool (``RuntimeError`` before :meth:`open` for an own pool)."""
        if self._pool is None:
            raise RuntimeError("AsyncPostgresTimerStore: not opened yet (await store.open())")
        return self._pool

    async def _firing_pool(self) -> AsyncConnectionPool[Any]:
        """As :meth:`PostgresTimerStore._firing_pool`: the firing connections of a store
        with its own pool, opened at the first call after one connection with their settings
        was tried (refused: the pool, with one warning); the pool given to a store that was
        given one."""
        if not self._owned:
            return self.pool
        if self._firing is not None:
            return self._firing
        if self._firing_lock is None:
            self._firing_lock = asyncio.Lock()
        async with self._firing_lock:
            if self._firing is None:
                pool, conninfo = self.pool, self._conninfo
                assert conninfo is not None
                try:
                    await probe_firing_async(conninfo, self._timeout)
                except Exception as exc:  # unreachable: raised, tried again next call
                    settings_refused(conninfo, exc)
                    self._firing = pool
                else:
                    firing = firing_async_pool(conninfo, self._timeout)
                    await firing.open(wait=False)
                    self._firing = firing
            return self._firing

    async def _send(
        self, plan: Plan[T], what: str, write: bool, *, atomic: bool = False, firing: bool = False
    ) -> T:
        limit = CallLimit(self._timeout)  # the pool's wait and the statements', together
        with pool_errors(plan.close, what):
            pool = await self._firing_pool() if firing else self.pool
            async with (
                pool.connection(timeout=limit.left()) as conn,
                limit.on_async(conn, what, write),
            ):
                return await run_async(conn, plan, what=what, write=write, atomic=atomic)

    async def _run(
        self, plan: Plan[T], what: str, write: bool, *, atomic: bool = False, firing: bool = False
    ) -> T:
        started = ahead(plan)  # a plan that needs no statement takes no connection
        if isinstance(started, Answered):
            return started.value
        if not self._ready:
            try:
                await self.open()
            except BaseException:
                plan.close()  # the plan itself: ``started`` has not run
                raise
        return await self._send(started, what, write, atomic=atomic, firing=firing)

    # -- the interface ---------------------------------------------------------------------

    async def now(self) -> datetime:
        clock = self.setup.clock
        if clock is not None:
            return clock.now()
        sent = self._sent()
        server: datetime = await self._run(self.setup.now(), "now", False)
        self._sampled(sent, server)  # a sample of server_time, too
        return server

    async def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        return await self._run(self.setup.put(item, deadline), f"put({item.id!r})", True)

    async def get(self, item_id: str) -> ScheduleItem | None:
        return await self._run(self.setup.get(item_id), f"get({item_id!r})", False)

    async def exists(self, item_id: str) -> bool:
        return await self._run(self.setup.exists(item_id), f"exists({item_id!r})", False)

    async def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        plan = self.setup.remove(item_id, generation, deadline)
        return await self._run(plan, f"remove({item_id!r})", True)

    async def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        return await self._run(self.setup.remove_flow(flow_id, deadline), "remove_flow", True)

    async def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        return await self._run(
            self.setup.claim_due(routes, owner, lease, limit), "claim", True, firing=True
        )

    async def claim_started(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        """As :meth:`PostgresTimerStore.claim_started`: the claims returned are started."""
        plan = self.setup.claim_started(routes, owner, lease, limit)
        return await self._run(plan, "claim_started", True, firing=True)

    async def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        return await self._run(self.setup.confirm_start(claims), "confirm_start", True, firing=True)

    async def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        return await self._run(self.setup.renew(claims, lease), "renew", True, firing=True)

    async def release(self, claims: Sequence[Claim]) -> int:
        return await self._run(self.setup.release(claims), "release", True, firing=True)

    async def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        return await self._run(self.setup.settle(settlements), "settle", True, firing=True)

    async def next_due(
        self, routes: Collection[str], after: datetime | None = None
    ) -> datetime | None:
        # The node asks with no ``after`` (firing); a ManualClock harness with one (its
        # optional filter keeps the server's planning).
        return await self._run(
            self.setup.next_due(routes, after), "next_due", False, firing=after is None
        )

    async def next_wake(
        self, routes: Collection[str], within: timedelta | None = None
    ) -> datetime | None:
        """As :meth:`PostgresTimerStore.next_wake`."""
        sent = self._sent()
        seen = await self._run(self.setup.next_due_seen(routes), "next_due", False, firing=True)
        return self._wake(sent, *seen)

    async def dead_letters(self) -> list[DeadLetter]:
        return await self._run(self.setup.dead_letters(), "dead_letters", False)

    async def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        return await self._run(self.setup.requeue(item_id, due), f"requeue({item_id!r})", True)

    async def quarantined(self) -> list[QuarantinedRecord]:
        return await self._run(self.setup.quarantined(), "quarantined", False)

    async def timers(self, query: TimerSelection) -> TimerPage:
        return await self._run(self.setup.timers(query), "timers", False)

    async def history(self, item_id: str) -> list[Attempt]:
        return await self._run(self.setup.history(item_id), f"history({item_id!r})", False)

    async def pause(self, item_id: str) -> bool:
        return await self._run(self.setup.pause(item_id), f"pause({item_id!r})", True)

    async def resume(self, item_id: str) -> bool:
        return await self._run(self.setup.resume(item_id), f"resume({item_id!r})", True)

    # -- beyond the interface: node heartbeats -----------------------------------------------

    async def heartbeat(self, node: str, routes: Collection[str], ttl: timedelta) -> None:
        """Advertise ``node`` as alive, serving ``routes``, for ``ttl`` (``<table>_nodes``)."""
        await self._run(self.setup.heartbeat(node, routes, ttl), "heartbeat", True)

    async def leave(self, node: str) -> None:
        """Remove ``node``'s heartbeat (it is closing)."""
        await self._run(self.setup.leave(node), "leave", True)

    async def live_nodes(self) -> list[LiveNode]:
        """The nodes whose last heartbeat has not expired, by id (see
        :mod:`flowsched.node.heartbeats`)."""
        return await self._run(self.setup.live_nodes(), "live_nodes", False)
