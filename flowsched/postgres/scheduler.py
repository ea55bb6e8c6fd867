"""Internal: ``PostgresScheduler`` - the scheduler port on PostgreSQL (public as
``flowsched.PostgresScheduler`` and ``flowsched.postgres.PostgresScheduler``).

Thin by design: the node core and its thread driver
(:class:`~flowsched.node.scheduler.NodeScheduler`) over a
:class:`~flowsched.postgres.PostgresTimerStore`, plus a LISTEN/NOTIFY listener that wakes
the node when another node schedules a timer due soon. Everything a node decides is the
core's; every statement is in ``queries.sql``.
"""

from __future__ import annotations

from typing import Any, Unpack

from psycopg_pool import ConnectionPool

from flowsched.node.heartbeats import Beats
from flowsched.node.scheduler import NodeScheduler
from flowsched.postgres.scheduler_options import (
    PostgresArgs,
    PostgresFace,
    notify_window,
    split_options,
    store_options,
)
from flowsched.postgres.store import PostgresTimerStore
from flowsched.postgres.wakeup import Listener

__all__ = ["PostgresScheduler", "notify_window"]


class PostgresScheduler(PostgresFace[Listener, Beats], NodeScheduler):
    """Timers in a PostgreSQL table, shared by every node on it (CONTRACT section 16).

    ``conninfo_or_pool``: a ``postgresql://`` URL (the scheduler opens a pool of its own, closed
    by :meth:`close`) or a ``psycopg_pool.ConnectionPool``. ``table`` (default
    ``flowsched_timers``) is created or upgraded on construction. Due times and leases are
    compared in SQL by the server's clock; with ``clock=`` (tests, a
    :class:`~flowsched.ManualClock`) by that clock's ``now()``. ``op_timeout`` bounds every call
    (a write that gives up raises ``OutcomeUnknown`` and, fenced by the server's clock, applies
    nothing if it arrives later); ``listen=False`` turns LISTEN/NOTIFY off (polling alone, every
    ``poll_interval``); ``durable_firing=True`` makes claims, starts and outcomes wait for the
    WAL flush too (by default only ``schedule``, ``cancel`` and the other calls of the port do:
    a server crash may then deliver the last ~200 ms of firings again, never lose a timer).
    ``history``: attempts kept per item and for how long after the last (default 20, 7 days).
    The other settings are ``MongoScheduler``'s. The keywords and their defaults:
    ``table="flowsched_timers"``, ``node_id=None``, ``poll_interval=timedelta(seconds=1)``,
    ``clock=None``, ``redelivery=None``, ``observer=None``, ``batch_size=100``,
    ``lease=timedelta(seconds=30)``, ``workers=8``, ``op_timeout=timedelta(seconds=10)``,
    ``shutdown_timeout=timedelta(seconds=30)``, ``listen=True``, ``pool_size=None`` (4),
    ``durable_firing=False``, ``history=None``.

    >>> with PostgresScheduler("postgresql://app@db/app") as scheduler:  # doctest: +SKIP
    ...     scheduler.register("send-reminder", send_reminder)
    """

    async_class = "AsyncPostgresScheduler"

    def __init__(
        self, conninfo_or_pool: str | ConnectionPool[Any], **options: Unpack[PostgresArgs]
    ) -> None:
        own, node, settings = split_options(options)
        store = PostgresTimerStore(conninfo_or_pool, **store_options(own, settings))
        try:
            super().__init__(store, **node)
        except BaseException:
            store.close()
            raise
        self._pg_store = store
        kinds = (Listener, Beats)
        self._add_helpers(
            store, conninfo_or_pool, kinds, own.listen, settings.poll_interval, self._driver.wake
        )

    def start(self) -> None:
        super().start()
        self._start_helpers()

    def close(self) -> None:
        """Stop firing and listening, wait for handlers in flight (at most
        ``shutdown_timeout``), then close the pool if the scheduler opened it."""
        if self._listener is not None:
            self._listener.stop()
        if self._beats is not None:
            self._beats.stop()
            self._beats = None
        super().close()
        self._pg_store.close()
