"""Internal: ``AsyncPostgresScheduler`` - the asyncio port on PostgreSQL (public as
``flowsched.AsyncPostgresScheduler`` and ``flowsched.postgres.AsyncPostgresScheduler``).

The twin of :class:`~flowsched.postgres.PostgresScheduler`: the node core and its asyncio
driver (:class:`~flowsched.node.async_scheduler.AsyncNodeScheduler`) over an
:class:`~flowsched.postgres.AsyncPostgresTimerStore`, woken by an asyncio LISTEN task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Unpack

from psycopg_pool import AsyncConnectionPool

from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.heartbeats import AsyncBeats
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.scheduler_options import (
    PostgresArgs,
    PostgresFace,
    split_options,
    store_options,
)
from flowsched.postgres.wakeup import AsyncListener

__all__ = ["AsyncPostgresScheduler"]


class AsyncPostgresScheduler(PostgresFace[AsyncListener, AsyncBeats], AsyncNodeScheduler):
    """:class:`~flowsched.postgres.PostgresScheduler` for asyncio: the same arguments, with a
    ``psycopg_pool.AsyncConnectionPool`` or a conninfo; handlers may be ``async def``
    (awaited on the loop) or plain (run in worker threads). ``await start()`` opens the pool
    and migrates the table; ``await aclose()`` closes what the scheduler opened.

    >>> async with AsyncPostgresScheduler("postgresql://app@db/app") as scheduler:  # doctest: +SKIP
    ...     scheduler.register("send-reminder", send_reminder)
    """

    def __init__(
        self, conninfo_or_pool: str | AsyncConnectionPool[Any], **options: Unpack[PostgresArgs]
    ) -> None:
        own, node, settings = split_options(options)
        store = AsyncPostgresTimerStore(conninfo_or_pool, **store_options(own, settings))
        super().__init__(store, **node)
        self._pg_store = store
        kinds = (AsyncListener, AsyncBeats)
        self._add_helpers(
            store, conninfo_or_pool, kinds, own.listen, settings.poll_interval, self._driver.wake
        )

    async def start(self) -> None:
        """Open the pool and migrate the table (if not done yet), then start firing."""
        await self._pg_store.open()
        await super().start()
        self._start_helpers()

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
