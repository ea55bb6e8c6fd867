"""Internal: the constructor keywords both durable schedulers (MongoDB's and PostgreSQL's,
either face) take from ``ipf-scheduler.flowsched``, listed once for their ``from_config``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowsched.history import history_policy
from flowsched.redelivery import redelivery_policy

if TYPE_CHECKING:
    from flowsched.clock import Clock
    from flowsched.config import SchedulerSettings
    from flowsched.delivery import Observer

__all__ = ["durable_arguments"]


def durable_arguments(
    settings: SchedulerSettings, node_id: str | None, clock: Clock | None, observer: Observer | None
) -> dict[str, Any]:
    """The keywords a durable scheduler takes from ``settings`` (``node_id`` wins over
    ``node-id``): one list, so that no face silently ignores a setting."""
    return {
        "node_id": node_id or settings.node_id,
        "poll_interval": settings.poll_interval,
        "clock": clock,
        "redelivery": redelivery_policy(settings),
        "observer": observer,
        "batch_size": settings.batch_size,
        "lease": settings.lease,
        "op_timeout": settings.op_timeout,
        "shutdown_timeout": settings.shutdown_timeout,
        "history": history_policy(settings),
    }
