"""Internal: ``PostgresScheduler`` - the scheduler port on PostgreSQL (public as
``flowsched.PostgresScheduler`` and ``flowsched.postgres.PostgresScheduler``).

Thin by design: the node core and its thread driver
(:class:`~flowsched.node.scheduler.NodeScheduler`) over a
:class:`~flowsched.postgres.PostgresTimerStore`, plus a LISTEN/NOTIFY listener that wakes
the node when another node schedules a timer due soon. Everything a node decides is the
core's; every statement is in ``queries.sql``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg_pool import ConnectionPool

from flowsched.clock import Clock
from flowsched.config import SchedulingConfig
from flowsched.delivery import Observer
from flowsched.history import HistoryPolicy
from flowsched.node.common import is_manual
from flowsched.node.scheduler import NodeScheduler
from flowsched.postgres.heartbeats import Beats
from flowsched.postgres.scheduler_options import notify_window, store_options
from flowsched.postgres.store import PostgresTimerStore
from flowsched.postgres.wakeup import Listener, conninfo_of
from flowsched.redelivery import RedeliveryPolicy

__all__ = ["PostgresScheduler", "notify_window"]


class PostgresScheduler(NodeScheduler):
    """Timers in a PostgreSQL table, shared by every node on it (CONTRACT section 16).

    ``conninfo_or_pool``: a ``postgresql://`` URL (the scheduler opens a pool of its own,
    closed by :meth:`close`) or a ``psycopg_pool.ConnectionPool``. ``table`` (default
    ``flowsched_timers``) is created or upgraded on construction. Due times and leases are
    compared in SQL by the server's clock; with ``clock=`` (tests, a
    :class:`~flowsched.ManualClock`) by that clock's ``now()``. ``op_timeout`` bounds the
    wait for a pooled connection; ``listen=False`` turns LISTEN/NOTIFY off (polling alone,
    every ``poll_interval``); ``durable_firing=True`` makes claims, starts and outcomes wait
    for the WAL flush too (by default only ``schedule``, ``cancel`` and the other calls of
    the port do: a server crash may then deliver the last ~200 ms of firings again, never
    lose a timer). ``history``: attempts kept per item and for how long after the last
    (default 20, 7 days). The other settings are ``MongoScheduler``'s.

    >>> with PostgresScheduler("postgresql://app@db/app") as scheduler:  # doctest: +SKIP
    ...     scheduler.register("send-reminder", send_reminder)
    """

    async_class = "AsyncPostgresScheduler"

    def __init__(
        self,
        conninfo_or_pool: str | ConnectionPool[Any],
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
        store = PostgresTimerStore(conninfo_or_pool, **options)
        try:
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
        except BaseException:
            store.close()
            raise
        self._pg_store = store
        self._listener: Listener | None = None
        self._helpers_started = False
        self._beats: Beats | None = None
        if not is_manual(self._clock):
            self._beats = Beats(store, self.node_id, self._delivery.routes, poll_interval)
        if listen and not is_manual(self._clock):
            channel = store.setup.queries.channel
            self._listener = Listener(conninfo_of(conninfo_or_pool), channel, self._heard)

    @property
    def table(self) -> str:
        """The timers table."""
        return self._pg_store.table

    def _heard(self, route: str | None) -> None:
        if route is None or route in self._delivery.routes():
            self._driver.wake()

    def start(self) -> None:
        super().start()
        if self._helpers_started:
            return
        self._helpers_started = True
        if self._listener is not None:
            self._listener.start()
        if self._beats is not None:
            self._beats.start()

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

    @classmethod
    def from_config(
        cls,
        config: SchedulingConfig,
        *,
        node_id: str | None = None,
        clock: Clock | None = None,
        observer: Observer | None = None,
    ) -> PostgresScheduler:
        """A scheduler on ``ipf-scheduler.postgres { url, table }`` with the settings of
        ``ipf-scheduler.flowsched`` (``node_id`` wins over ``node-id``; ``shutdown-timeout``
        bounds :meth:`close`; ``history-limit`` and ``history-retention`` the history) and
        the named calendars of ``ipf-scheduler.calendars`` (``calendar="name"`` resolves
        against them). A missing ``url`` is a :class:`~flowsched.ConfigError` naming the key.

        >>> config = SchedulingConfig.from_file("config/application.conf")  # doctest: +SKIP
        >>> with PostgresScheduler.from_config(config) as scheduler: ...  # doctest: +SKIP
        """
        from flowsched.postgres.from_config import build

        return build(cls, config, node_id, clock, observer)
