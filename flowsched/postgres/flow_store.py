"""Internal: ``PostgresFlowStore`` and ``AsyncPostgresFlowStore``, flow instances in a
PostgreSQL table (public in :mod:`flowsched.postgres`).

One row per instance - ``flow_id`` (primary key), ``version`` and the instance's
``document`` (``jsonb``) - created on first use. ``version`` is the optimistic fence of
:class:`~flowsched.flow.store.FlowStore`: an update matches only the version that was loaded,
so two hosts deciding for one instance at once cannot lose either decision (one gets
:class:`~flowsched.ConcurrentUpdateError`, reloads and decides again).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from flowsched.errors import ConcurrentUpdateError, FlowAlreadyExistsError, MalformedDocument
from flowsched.flow.instance import FlowInstance
from flowsched.postgres.connections import (
    DEFAULT_POOL_SIZE,
    check_conninfo,
    own_async_pool,
    own_pool,
)
from flowsched.postgres.plans import Plan, Statement, run, run_async
from flowsched.postgres.queries import Queries

__all__ = ["AsyncPostgresFlowStore", "PostgresFlowStore"]

PoolT = TypeVar("PoolT")


def _create(queries: Queries) -> Plan[None]:
    yield Statement(queries["schema_lock"], {"key": f"flowsched:{queries.table}"})
    yield Statement(queries["flow_table"])
    return None


def _load(queries: Queries, flow_id: str) -> Plan[FlowInstance | None]:
    rows = yield Statement(queries["flow_load"], {"flow_id": flow_id})
    if not rows:
        return None
    document, version = rows[0]
    if not isinstance(document, dict) or not isinstance(version, int):
        raise MalformedDocument(flow_id, f"flow row holds {document!r:.80} at version {version!r}")
    return FlowInstance.from_document({**document, "version": version})


def _document(instance: FlowInstance) -> Jsonb:
    document = instance.to_document()
    document.pop("version", None)  # the column is the truth
    return Jsonb(document)


def _insert(queries: Queries, instance: FlowInstance) -> Plan[FlowInstance]:
    params = {"flow_id": instance.flow_id, "document": _document(instance)}
    rows = yield Statement(queries["flow_insert"], params)
    if not rows:
        raise FlowAlreadyExistsError(f"flow instance {instance.flow_id!r} already exists")
    return instance.evolve(version=1)


def _update(queries: Queries, instance: FlowInstance) -> Plan[FlowInstance]:
    params = {
        "flow_id": instance.flow_id,
        "version": instance.version,
        "document": _document(instance),
    }
    rows = yield Statement(queries["flow_update"], params)
    if not rows:
        raise ConcurrentUpdateError(
            f"flow instance {instance.flow_id!r}: version {instance.version} is no longer"
            " the stored one"
        )
    return instance.evolve(version=instance.version + 1)


class _FlowStoreBase(Generic[PoolT]):
    """The arguments of both flow stores (the table's statements are the plans above)."""

    def __init__(
        self,
        conninfo_or_pool: str | PoolT,
        *,
        table: str = "flowsched_flows",
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.queries = Queries(table)
        self._attach(conninfo_or_pool, pool_size)

    def _attach(self, conninfo_or_pool: str | PoolT, pool_size: int) -> None:
        """Take the pool given, or open (now or later) one of ``pool_size`` connections to
        the conninfo given; create the table (now or later)."""
        raise NotImplementedError


class PostgresFlowStore(_FlowStoreBase[ConnectionPool[Any]]):
    """A :class:`~flowsched.flow.store.FlowStore` in a PostgreSQL table (default
    ``flowsched_flows``, created if missing). ``conninfo_or_pool``: a ``postgresql://`` URL
    (a pool of the store's own, closed by :meth:`close`) or a ``psycopg_pool.ConnectionPool``.

    >>> store = PostgresFlowStore("postgresql://app@db/app")  # doctest: +SKIP
    """

    def _attach(self, conninfo_or_pool: str | ConnectionPool[Any], pool_size: int) -> None:
        if isinstance(conninfo_or_pool, ConnectionPool):
            self.pool: ConnectionPool[Any] = conninfo_or_pool
            self._owned = False
        else:
            self.pool = own_pool(conninfo_or_pool, pool_size, None)
            self._owned = True
        with self.pool.connection() as conn:
            what = f"create {self.queries.table}"
            run(conn, _create(self.queries), what=what, write=True, atomic=True)

    def load(self, flow_id: str) -> FlowInstance | None:
        with self.pool.connection() as conn:
            return run(conn, _load(self.queries, flow_id), what="load", write=False)

    def insert(self, instance: FlowInstance) -> FlowInstance:
        with self.pool.connection() as conn:
            return run(conn, _insert(self.queries, instance), what="insert", write=True)

    def update(self, instance: FlowInstance) -> FlowInstance:
        with self.pool.connection() as conn:
            return run(conn, _update(self.queries, instance), what="update", write=True)

    def close(self) -> None:
        """Close the pool if this store opened it."""
        if self._owned:
            self.pool.close()


class AsyncPostgresFlowStore(_FlowStoreBase[AsyncConnectionPool[Any]]):
    """:class:`PostgresFlowStore` with coroutine calls (an
    :class:`~flowsched.flow.store.AsyncFlowStore`), on a ``psycopg_pool.AsyncConnectionPool``
    or a conninfo (its pool opened, and the table created, on the first call)."""

    def _attach(self, conninfo_or_pool: str | AsyncConnectionPool[Any], pool_size: int) -> None:
        self._pool: AsyncConnectionPool[Any] | None = None
        self._conninfo: str | None = None
        if isinstance(conninfo_or_pool, AsyncConnectionPool):
            self._pool = conninfo_or_pool
        else:
            self._conninfo = check_conninfo(conninfo_or_pool)
        self._size = pool_size
        self._ready = False

    async def _connection_pool(self) -> AsyncConnectionPool[Any]:
        if self._pool is None:
            assert self._conninfo is not None
            self._pool = await own_async_pool(self._conninfo, self._size, None)
        if not self._ready:
            async with self._pool.connection() as conn:
                await run_async(conn, _create(self.queries), what="create", write=True, atomic=True)
            self._ready = True
        return self._pool

    async def load(self, flow_id: str) -> FlowInstance | None:
        async with (await self._connection_pool()).connection() as conn:
            return await run_async(conn, _load(self.queries, flow_id), what="load", write=False)

    async def insert(self, instance: FlowInstance) -> FlowInstance:
        async with (await self._connection_pool()).connection() as conn:
            plan = _insert(self.queries, instance)
            return await run_async(conn, plan, what="insert", write=True)

    async def update(self, instance: FlowInstance) -> FlowInstance:
        async with (await self._connection_pool()).connection() as conn:
            plan = _update(self.queries, instance)
            return await run_async(conn, plan, what="update", write=True)

    async def aclose(self) -> None:
        """Close the pool if this store opened it."""
        if self._conninfo is not None and self._pool is not None:
            await self._pool.close()
            self._pool = None
            self._ready = False
