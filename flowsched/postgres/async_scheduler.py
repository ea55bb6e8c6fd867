"""Internal: ``AsyncPostgresScheduler`` - the asyncio port on PostgreSQL (public as
``flowsched.AsyncPostgresScheduler`` and ``flowsched.postgres.AsyncPostgresScheduler``).

The twin of :class:`~flowsched.postgres.PostgresScheduler`: the node core and its asyncio
driver (:class:`~flowsched.node.async_scheduler.AsyncNodeScheduler`) over an
:class:`~flowsched.postgres.AsyncPostgresTimerStore`, woken by an asyncio LISTEN task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from flowsched.clock import Clock
from flowsched.config import SchedulingConfig
from flowsched.delivery import Observer
from flowsched.history import HistoryPolicy
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.common import is_manual
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.heartbeats import AsyncBeats
from flowsched.postgres.scheduler_options import store_options
from flowsched.postgres.wakeup import AsyncListener, conninfo_of
from flowsched.redelivery import RedeliveryPolicy

__all__ = ["AsyncPostgresScheduler"]


class AsyncPostgresScheduler(AsyncNodeScheduler):
    """:class:`~flowsched.postgres.PostgresScheduler` for asyncio: the same arguments, with a
    ``psycopg_pool.AsyncConnectionPool`` or a conninfo; handlers may be ``async def``
    (awaited on the loop) or plain (run in worker threads). ``await start()`` opens the pool
    and migrates the table; ``await aclose()`` closes what the scheduler opened.

    >>> async with AsyncPostgresScheduler("postgresql://app@db/app") as scheduler:  # doctest: +SKIP
    ...     scheduler.register("send-reminder", send_reminder)
    """

    def __init__(
        self,
        conninfo_or_pool: str | AsyncConnectionPool[Any],
        *,
        table: str = "flowsched_timers",
        node_id: str | None = None,
        poll_interval: timedelta = timedelta(seconds=1),
        clock: Clock | None = None,
        redelivery: RedeliveryPolicy | None = None,
        observer: Observer | None = None,
        batch_size: int = 100,
        lease: timedelta = timedelta(seconds=30),
        workers: int = 8,
        op_timeout: timedelta | None = timedelta(seconds=10),
        shutdown_timeout: timedelta = timedelta(seconds=30),
        listen: bool = True,
        pool_size: int | None = None,
        durable_firing: bool = False,
        history: HistoryPolicy | None = None,
    ) -> None:
        options = store_options(
            table=table, clock=clock, poll_interval=poll_interval, op_timeout=op_timeout,
            pool_size=pool_size, durable_firing=durable_firing, history=history,
        )  # fmt: skip
        store = AsyncPostgresTimerStore(conninfo_or_pool, **options)
        super().__init__(
            store,
            clock=clock,
            redelivery=redelivery,
            observer=observer,
            node_id=node_id,
            poll_interval=poll_interval,
            batch_size=batch_size,
            lease=lease,
            workers=workers,
            shutdown_timeout=shutdown_timeout,
        )
        self._pg_store = store
        self._listener: AsyncListener | None = None
        self._helpers_started = False
        self._beats: AsyncBeats | None = None
        if not is_manual(self._clock):
            self._beats = AsyncBeats(store, self.node_id, self._delivery.routes, poll_interval)
        if listen and not is_manual(self._clock):
            channel = store.setup.queries.channel
            self._listener = AsyncListener(conninfo_of(conninfo_or_pool), channel, self._heard)

    @property
    def table(self) -> str:
        """The timers table."""
        return self._pg_store.table

    def _heard(self, route: str | None) -> None:
        if route is None or route in self._delivery.routes():
            self._driver.wake()

    async def start(self) -> None:
        """Open the pool and migrate the table (if not done yet), then start firing."""
        await self._pg_store.open()
        await super().start()
        if self._helpers_started:
            return
        self._helpers_started = True
        if self._listener is not None:
            self._listener.start()
        if self._beats is not None:
            self._beats.start()

    async def aclose(self, timeout: float | timedelta | None = None) -> None:
        """Stop listening and firing (handlers in flight waited for at most ``timeout``,
        default ``shutdown_timeout``), then close the pool if the scheduler opened it."""
        if self._listener is not None:
            await self._listener.stop()
        if self._beats is not None:
            await self._beats.stop()
            self._beats = None
        await super().aclose(timeout)
        await self._pg_store.aclose()

    @classmethod
    def from_config(
        cls,
        config: SchedulingConfig,
        *,
        node_id: str | None = None,
        clock: Clock | None = None,
        observer: Observer | None = None,
    ) -> AsyncPostgresScheduler:
        """As :meth:`flowsched.postgres.PostgresScheduler.from_config`."""
        from flowsched.postgres.from_config import build

        return build(cls, config, node_id, clock, observer)
