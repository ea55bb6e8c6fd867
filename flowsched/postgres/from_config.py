"""Internal: ``PostgresScheduler.from_config`` / ``AsyncPostgresScheduler.from_config``.

Kept out of the schedulers (as :mod:`flowsched.mongo.from_config` is) so that every setting a
config gives is listed once, for both faces: the table and URL of ``ipf-scheduler.postgres``,
the settings of ``ipf-scheduler.flowsched`` (``shutdown-timeout`` and the history's
``history-limit`` / ``history-retention`` among them) and the named calendars of
``ipf-scheduler.calendars`` (a recurrence's ``calendar="name"`` resolves against them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from flowsched.delivery import Observer, redelivery_policy
from flowsched.history import history_policy

if TYPE_CHECKING:
    from flowsched.clock import Clock
    from flowsched.config import SchedulerSettings, SchedulingConfig
    from flowsched.postgres.async_scheduler import AsyncPostgresScheduler
    from flowsched.postgres.scheduler import PostgresScheduler

__all__ = ["build"]

S = TypeVar("S", "PostgresScheduler", "AsyncPostgresScheduler")


def arguments(
    settings: SchedulerSettings, node_id: str | None, clock: Clock | None, observer: Observer | None
) -> dict[str, Any]:
    """The constructor arguments both faces take from ``settings`` (one list: a setting
    neither face may silently ignore)."""
    return {
        "table": settings.postgres_table,
        "node_id": node_id or settings.node_id,
        "poll_interval": settings.poll_interval,
        "clock": clock,
        "redelivery": redelivery_policy(settings),
        "observer": observer,
        "batch_size": settings.batch_size,
        "lease": settings.lease,
        "workers": settings.workers,
        "op_timeout": settings.op_timeout,
        "shutdown_timeout": settings.shutdown_timeout,
        "history": history_policy(settings),
    }


def build(
    cls: type[S],
    config: SchedulingConfig,
    node_id: str | None,
    clock: Clock | None,
    observer: Observer | None,
) -> S:
    """``cls`` on ``config``'s PostgreSQL URL and table, with its settings and its named
    calendars. A missing ``url`` is a :class:`~flowsched.ConfigError` naming the key,
    raised before any connection is made."""
    settings = config.scheduler_settings()
    scheduler = cls(settings.postgres(), **arguments(settings, node_id, clock, observer))
    scheduler.calendars = settings.calendars
    return scheduler
