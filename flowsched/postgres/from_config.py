"""Internal: ``PostgresScheduler.from_config`` / ``AsyncPostgresScheduler.from_config``.

Kept out of the schedulers (as :mod:`flowsched.mongo.from_config` is) so that every setting a
config gives is listed once, for both faces: the table and URL of ``ipf-scheduler.postgres``,
the settings of ``ipf-scheduler.flowsched`` (``shutdown-timeout`` and the history's
``history-limit`` / ``history-retention`` among them) and the named calendars of
``ipf-scheduler.calendars`` (a recurrence's ``calendar="name"`` resolves against them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from flowsched.scheduler_arguments import durable_arguments

if TYPE_CHECKING:
    from flowsched.clock import Clock
    from flowsched.config import SchedulingConfig
    from flowsched.delivery import Observer
    from flowsched.postgres.scheduler_options import PostgresFace

__all__ = ["build"]

S = TypeVar("S", bound="PostgresFace[Any, Any]")


def build(
    cls: Callable[..., S],
    config: SchedulingConfig,
    node_id: str | None,
    clock: Clock | None,
    observer: Observer | None,
) -> S:
    """``cls`` on ``config``'s PostgreSQL URL and table, with its settings and its named
    calendars. A missing ``url`` is a :class:`~flowsched.ConfigError` naming the key,
    raised before any connection is made."""
    settings = config.scheduler_settings()
    url = settings.postgres()
    arguments = durable_arguments(settings, node_id, clock, observer)
    scheduler = cls(url, table=settings.postgres_table, workers=settings.workers, **arguments)
    scheduler.calendars = settings.calendars
    return scheduler
