"""The generic node schedulers over the reference store keep the scheduler port's contract."""

from __future__ import annotations

from flowsched import ManualClock, RedeliveryPolicy
from flowsched.node.scheduler import NodeScheduler
from flowsched.store import MemoryTimerStore
from flowsched.testing import check_scheduler_port


def _sync(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> NodeScheduler:
    return NodeScheduler(MemoryTimerStore(clock), clock=clock, redelivery=policy)


def test_sync_node_scheduler_keeps_the_port() -> None:
    check_scheduler_port(_sync, redelivery_factory=_sync)
