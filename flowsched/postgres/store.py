"""Internal: ``PostgresTimerStore``, the synchronous :class:`~flowsched.store.TimerStore` on
PostgreSQL (public as ``flowsched.postgres.PostgresTimerStore``).

Every method is one transaction on one pooled connection, and almost always one statement
(see ``queries.sql``); the statements and decoding are shared with the asyncio twin
(:mod:`flowsched.postgres.async_store`) through :mod:`flowsched.postgres.operations`.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from psycopg_pool import ConnectionPool

from flowsched.node.heartbeats import LiveNode
from flowsched.postgres.connections import (
    firing_pool,
    own_pool,
    pool_errors,
    probe_firing,
    settings_refused,
)
from flowsched.postgres.plans import Answered, Plan, ahead, run
from flowsched.postgres.schema import migrate_plan
from flowsched.postgres.store_base import StoreBase
from flowsched.postgres.time_limit import CallLimit
from flowsched.records import DeadLetter, ScheduleItem
from flowsched.steering import Attempt, TimerPage
from flowsched.store import Claim, QuarantinedRecord, Settlement, SettleResult, TimerSelection

__all__ = ["PostgresTimerStore"]

T = TypeVar("T")


class PostgresTimerStore(StoreBase[ConnectionPool[Any]]):
    """Timers in a PostgreSQL table, for a node core's thread driver and the port's calls.

    ``conninfo_or_pool``: a ``postgresql://`` URL (the store opens and closes a pool of
    ``pool_size`` connections, and at its first firing call, the firing connections:
    :data:`~flowsched.postgres.connections.FIRING_SETTINGS`) or a
    ``psycopg_pool.ConnectionPool`` the application owns (every call runs on it).
    ``table`` names the timers table (its companions add suffixes; see
    :mod:`flowsched.postgres.schema`), created or upgraded at construction unless
    ``migrate=False``. ``clock``: compare due times and leases with this clock's ``now()``
    (tests); by default the server's own time. ``op_timeout``: the longest a call takes,
    the pool's wait included (then it gives up: :mod:`flowsched.postgres.time_limit`).
    ``durable_firing``: see
    :attr:`flowsched.postgres.operations.Setup.durable_firing` (default: the firing path's
    writes do not wait for the WAL flush; the port's calls always do).

    >>> store = PostgresTimerStore("postgresql://app@db/app")  # doctest: +SKIP
    """

    def _attach(
        self, conninfo_or_pool: str | ConnectionPool[Any], pool_size: int, migrate: bool
    ) -> None:
        if isinstance(conninfo_or_pool, ConnectionPool):
            self.pool: ConnectionPool[Any] = conninfo_or_pool
            self._owned = False
            self._firing: ConnectionPool[Any] = self.pool  # the application's: used as it is
        else:
            self.pool = own_pool(conninfo_or_pool, pool_size, self._timeout)
            self._owned = True
            self._firing = firing_pool(conninfo_or_pool, self._timeout)
            self._conninfo = conninfo_or_pool
        self._firing_ready = not self._owned  # own: checked and opened at the first use
        self._firing_lock = threading.Lock()
        self._closed = False
        if migrate:
            self.version = self._run(
                migrate_plan(self.setup.queries), f"migrate {self.table}", True, atomic=True
            )

    def __repr__(self) -> str:
        return f"PostgresTimerStore(table={self.table!r}, pool={self.pool.name!r})"

    def close(self) -> None:
        """Close the pool if this store opened it (a pool given is left to its owner)."""
        self._closed = True
        if self._owned:
            self._firing.close()
            self.pool.close()

    def __enter__(self) -> PostgresTimerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(
        self, plan: Plan[T], what: str, write: bool, *, atomic: bool = False, firing: bool = False
    ) -> T:
        """Run ``plan`` on a connection of the pool (``firing``: of the firing connections,
        :data:`~flowsched.postgres.connections.FIRING_SETTINGS`, opened at the first)."""
        started = ahead(plan)  # a plan that needs no statement takes no connection
        if isinstance(started, Answered):
            return started.value
        limit = CallLimit(self._timeout)  # the pool's wait and the statements', together
        with pool_errors(plan.close, what):  # the plan itself: ``started`` may not have run
            pool = self._firing_pool() if firing else self.pool
            with pool.connection(timeout=limit.left()) as conn, limit.on(conn, what, write):
                return run(conn, started, what=what, write=write, atomic=atomic)

    def _firing_pool(self) -> ConnectionPool[Any]:
        """The firing connections, opened (without waiting) at the first call after one
        connection with their settings was tried: refused (a pooler in between, an old
        server), the firing statements run on the pool from then on, with one warning. A
        closed store opens nothing again."""
        if self._firing_ready or self._closed:
            return self._firing
        with self._firing_lock:
            if not self._firing_ready and not self._closed:
                try:
                    probe_firing(self._conninfo, self._timeout)
                except Exception as exc:  # unreachable: raised, tried again next call
                    settings_refused(self._conninfo, exc)
                    self._firing = self.pool
                else:
                    self._firing.open(wait=False)
                self._firing_ready = True
        return self._firing

    # -- the interface ---------------------------------------------------------------------

    def now(self) -> datetime:
        clock = self.setup.clock
        if clock is not None:
            return clock.now()
        sent = self._sent()
        server: datetime = self._run(self.setup.now(), "now", False)
        self._sampled(sent, server)  # a sample of server_time, too
        return server

    def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        return self._run(self.setup.put(item, deadline), f"put({item.id!r})", True)

    def get(self, item_id: str) -> ScheduleItem | None:
        return self._run(self.setup.get(item_id), f"get({item_id!r})", False)

    def exists(self, item_id: str) -> bool:
        return self._run(self.setup.exists(item_id), f"exists({item_id!r})", False)

    def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        plan = self.setup.remove(item_id, generation, deadline)
        return self._run(plan, f"remove({item_id!r})", True)

    def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        return self._run(self.setup.remove_flow(flow_id, deadline), "remove_flow", True)

    def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        return self._run(
            self.setup.claim_due(routes, owner, lease, limit), "claim", True, firing=True
        )

    def claim_started(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        """Beyond the interface: :meth:`claim_due` and :meth:`confirm_start` of every claim in
        one statement, for a node that starts each claim it gets at once (the node core's
        ``start_on_claim``). The claims returned are started: each has its start recorded
        (an open attempt in the history), and the caller must start them now."""
        plan = self.setup.claim_started(routes, owner, lease, limit)
        return self._run(plan, "claim_started", True, firing=True)

    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        return self._run(self.setup.confirm_start(claims), "confirm_start", True, firing=True)

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        return self._run(self.setup.renew(claims, lease), "renew", True, firing=True)

    def release(self, claims: Sequence[Claim]) -> int:
        return self._run(self.setup.release(claims), "release", True, firing=True)

    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        return self._run(self.setup.settle(settlements), "settle", True, firing=True)

    def next_due(self, routes: Collection[str], after: datetime | None = None) -> datetime | None:
        # The node asks with no ``after`` (firing); a ManualClock harness with one (its
        # optional filter keeps the server's planning).
        return self._run(
            self.setup.next_due(routes, after), "next_due", False, firing=after is None
        )

    def next_wake(
        self, routes: Collection[str], within: timedelta | None = None
    ) -> datetime | None:
        """:meth:`next_due` as this host's clock (:attr:`host_clock`) will read it, when the
        server's time judges due (no ``clock=``): what a node sleeps until, so that it never
        wakes before the server says due (shifted by :attr:`server_time`). ``within`` is
        the MongoDB stores' bound, not needed here: the index scan stops at the first row."""
        sent = self._sent()
        seen = self._run(self.setup.next_due_seen(routes), "next_due", False, firing=True)
        return self._wake(sent, *seen)

    def dead_letters(self) -> list[DeadLetter]:
        return self._run(self.setup.dead_letters(), "dead_letters", False)

    def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        return self._run(self.setup.requeue(item_id, due), f"requeue({item_id!r})", True)

    def quarantined(self) -> list[QuarantinedRecord]:
        return self._run(self.setup.quarantined(), "quarantined", False)

    def timers(self, query: TimerSelection) -> TimerPage:
        return self._run(self.setup.timers(query), "timers", False)

    def history(self, item_id: str) -> list[Attempt]:
        return self._run(self.setup.history(item_id), f"history({item_id!r})", False)

    def pause(self, item_id: str) -> bool:
        return self._run(self.setup.pause(item_id), f"pause({item_id!r})", True)

    def resume(self, item_id: str) -> bool:
        return self._run(self.setup.resume(item_id), f"resume({item_id!r})", True)

    # -- beyond the interface: node heartbeats -----------------------------------------------

    def heartbeat(self, node: str, routes: Collection[str], ttl: timedelta) -> None:
        """Advertise ``node`` as alive, serving ``routes``, for ``ttl`` (``<table>_nodes``)."""
        self._run(self.setup.heartbeat(node, routes, ttl), "heartbeat", True)

    def leave(self, node: str) -> None:
        """Remove ``node``'s heartbeat (it is closing)."""
        self._run(self.setup.leave(node), "leave", True)

    def live_nodes(self) -> list[LiveNode]:
        """The nodes whose last heartbeat has not expired, by id (see
        :mod:`flowsched.node.heartbeats`)."""
        return self._run(self.setup.live_nodes(), "live_nodes", False)
