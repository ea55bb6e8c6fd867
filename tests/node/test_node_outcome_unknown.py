"""A node scheduler's cancel whose first reply was lost (CONTRACT section 15), both faces:
it answers True for a timer it removed, False for none, and OutcomeUnknown when the retry
cannot tell; its writes carry the store's deadline."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched import ManualClock, OutcomeUnknown, ScheduleItem, ScheduleKind
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.store import MemoryTimerStore, as_async

START = datetime(2030, 1, 1, tzinfo=UTC)
LIMIT = timedelta(seconds=5)


class LossyStore(MemoryTimerStore):
    """The reference store with an ``op_timeout``, whose ``remove`` can apply and then lose
    its reply (``lose``), and whose reads can fail (``down``); it records the deadlines."""

    op_timeout = LIMIT

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.lose = 0
        self.down = False
        self.deadlines: list[datetime | None] = []

    def remove(self, item_id: str, **fence: Any) -> bool:
        self.deadlines.append(fence.get("deadline"))
        removed = super().remove(item_id, **fence)
        if self.lose:
            self.lose -= 1
            raise OutcomeUnknown(f"remove({item_id!r}): may or may not have taken effect")
        return removed

    def exists(self, item_id: str) -> bool:
        if self.down:
            raise OutcomeUnknown("exists: no reply")
        return super().exists(item_id)


def cancel_on(face: str, store: LossyStore, clock: ManualClock, item_id: str) -> bool:
    """Cancel ``item_id`` through a fresh scheduler of ``face``."""
    if face == "sync":
        return NodeScheduler(store, clock=clock).cancel(item_id)

    async def run() -> bool:
        return await AsyncNodeScheduler(as_async(store), clock=clock).cancel(item_id)

    return asyncio.run(run())


FACES = ["sync", "async"]


def stored(store: LossyStore, clock: ManualClock) -> LossyStore:
    store.put(ScheduleItem("t", ScheduleKind.TIMER, clock.now() + timedelta(hours=1)))
    return store


@pytest.mark.parametrize("face", FACES)
def test_a_cancel_whose_reply_was_lost_answers_true(face: str) -> None:
    clock = ManualClock(START)
    store = stored(LossyStore(clock), clock)
    store.lose = 1
    assert cancel_on(face, store, clock, "t") is True
    assert not store.exists("t")
    assert store.deadlines == [START + LIMIT]  # fenced by the store's time plus op_timeout
    assert cancel_on(face, store, clock, "t") is False


@pytest.mark.parametrize("face", FACES)
def test_a_cancel_whose_retry_cannot_tell_says_the_outcome_is_unknown(face: str) -> None:
    clock = ManualClock(START)
    store = stored(LossyStore(clock), clock)
    store.lose, store.down = 1, True
    with pytest.raises(OutcomeUnknown, match="may or may not have taken effect"):
        cancel_on(face, store, clock, "t")
