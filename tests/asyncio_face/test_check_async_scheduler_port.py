"""``check_async_scheduler_port`` proves the async in-memory adapter, and catches adapters
that break the async face's promises (a coroutine dropped, a cancelled delivery settled)."""

from __future__ import annotations

import pytest

from flowsched import AsyncInMemoryScheduler, ManualClock, RedeliveryPolicy
from flowsched.callables import is_async_callable
from flowsched.delivery import Completed, Outcome
from flowsched.store import Claim
from flowsched.testing import async_port_guarantees, check_async_scheduler_port, port_guarantees


def test_the_async_in_memory_scheduler_keeps_every_guarantee() -> None:
    check_async_scheduler_port(
        lambda clock: AsyncInMemoryScheduler(clock=clock),
        redelivery_factory=lambda clock, policy: AsyncInMemoryScheduler(
            clock=clock, redelivery=policy
        ),
    )


def test_the_async_list_is_the_sync_list_plus_the_async_face() -> None:
    names = async_port_guarantees()
    assert names[: len(port_guarantees())] == port_guarantees()
    assert any("async def handlers are awaited" in name for name in names)
    assert any("cancelled by shutdown is not settled" in name for name in names)


def test_a_coroutine_factory_is_awaited() -> None:
    async def factory(clock: ManualClock) -> AsyncInMemoryScheduler:
        return AsyncInMemoryScheduler(clock=clock)

    check_async_scheduler_port(factory)


class DropsCoroutines(AsyncInMemoryScheduler):
    """Broken on purpose: calls an async handler and completes the item unawaited."""

    async def _run(self, claim: Claim) -> Outcome:
        handler = self._delivery.started(claim.item, claim.attempt)
        if not is_async_callable(handler):
            return await super()._run(claim)
        result = handler(claim.item, claim.attempt)
        close = getattr(result, "close", None)
        if close is not None:
            close()
        return Completed()


class SettlesCancelledDeliveries(AsyncInMemoryScheduler):
    """Broken on purpose: a delivery cancelled by shutdown counts as a failure."""

    async def _run(self, claim: Claim) -> Outcome:
        try:
            return await super()._run(claim)
        except BaseException:
            return self._delivery.failure(claim.item, claim.attempt, "cancelled")


@pytest.mark.parametrize(
    ("broken", "guarantee"),
    [
        (DropsCoroutines, "async def handlers are awaited to their end"),
        (SettlesCancelledDeliveries, "a delivery cancelled by shutdown is not settled"),
    ],
)
def test_a_broken_adapter_is_named_by_the_guarantee_it_breaks(
    broken: type[AsyncInMemoryScheduler], guarantee: str
) -> None:
    with pytest.raises(AssertionError, match=guarantee):
        check_async_scheduler_port(
            lambda clock: broken(clock=clock),
            redelivery_factory=lambda clock, policy: broken(clock=clock, redelivery=policy),
        )


def test_a_sync_guarantee_broken_on_the_async_face_is_named_too() -> None:
    class NeverRedelivers(AsyncInMemoryScheduler):
        def __init__(self, clock: ManualClock) -> None:
            super().__init__(clock=clock, redelivery=RedeliveryPolicy(max_attempts=1))

    with pytest.raises(AssertionError, match="redelivered after 3, 6, 12"):
        check_async_scheduler_port(NeverRedelivers)
