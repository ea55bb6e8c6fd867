"""The generic node schedulers over the reference store keep the scheduler port's contract."""

from __future__ import annotations

from flowsched import ManualClock, RedeliveryPolicy
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.store import MemoryTimerStore, as_async
from flowsched.testing import check_async_scheduler_port, check_scheduler_port


def _sync(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> NodeScheduler:
    return NodeScheduler(MemoryTimerStore(clock), clock=clock, redelivery=policy)


def test_sync_node_scheduler_keeps_the_port() -> None:
    check_scheduler_port(_sync, redelivery_factory=_sync)


def _async(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> AsyncNodeScheduler:
    return AsyncNodeScheduler(as_async(MemoryTimerStore(clock)), clock=clock, redelivery=policy)


def test_async_node_scheduler_keeps_the_port() -> None:
    check_async_scheduler_port(_async, redelivery_factory=_async)
