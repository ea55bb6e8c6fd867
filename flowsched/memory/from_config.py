"""Internal: ``from_config`` of both in-memory faces - the settings that apply in process.

Kept out of the scheduler module (as :mod:`flowsched.mongo.from_config` is) so that it stays
thin: everything read and validated lives in :class:`~flowsched.config.SchedulerSettings`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from flowsched.clock import Clock
from flowsched.delivery import Observer, redelivery_policy
from flowsched.history import history_policy

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig
    from flowsched.memory.async_scheduler import AsyncInMemoryScheduler
    from flowsched.memory.scheduler import InMemoryScheduler

__all__ = ["build"]

S = TypeVar("S", "InMemoryScheduler", "AsyncInMemoryScheduler")


def build(
    cls: Callable[..., S],
    config: SchedulingConfig,
    clock: Clock | None,
    observer: Observer | None,
    **pool: int,
) -> S:
    """``cls`` (either face) with ``redelivery``, ``max-attempts``, ``shutdown-timeout`` and
    the history settings of ``ipf-scheduler.flowsched``, and the named
    ``ipf-scheduler.calendars`` (a recurrence's ``calendar="name"`` resolves against them).
    ``pool``: the face's own pool keyword (``concurrency=``), else ``workers`` from the
    settings (the threaded face's)."""
    settings = config.scheduler_settings()
    scheduler = cls(
        clock=clock,
        redelivery=redelivery_policy(settings),
        observer=observer,
        shutdown_timeout=settings.shutdown_timeout,
        history=history_policy(settings),
        **(pool or {"workers": settings.workers}),
    )
    scheduler.calendars = settings.calendars
    return scheduler
