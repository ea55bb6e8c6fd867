"""Internal: ``InMemoryScheduler.from_config`` - the settings that apply in process.

Kept out of the scheduler module (as :mod:`flowsched.mongo.from_config` is) so that it stays
thin: everything read and validated lives in :class:`~flowsched.config.SchedulerSettings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowsched.clock import Clock
from flowsched.delivery import Observer, redelivery_policy
from flowsched.history import history_policy

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig
    from flowsched.memory.scheduler import InMemoryScheduler

__all__ = ["build"]


def build(
    cls: type[InMemoryScheduler],
    config: SchedulingConfig,
    clock: Clock | None,
    observer: Observer | None,
) -> InMemoryScheduler:
    """``cls`` with ``redelivery``, ``max-attempts`` and ``workers`` of
    ``ipf-scheduler.flowsched``, and the named ``ipf-scheduler.calendars`` (a recurrence's
    ``calendar="name"`` resolves against them)."""
    settings = config.scheduler_settings()
    redelivery = redelivery_policy(settings)
    scheduler = cls(
        clock=clock,
        redelivery=redelivery,
        observer=observer,
        workers=settings.workers,
        shutdown_timeout=settings.shutdown_timeout,
        history=history_policy(settings),
    )
    scheduler.calendars = settings.calendars
    return scheduler
