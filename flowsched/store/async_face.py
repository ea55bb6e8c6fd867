"""Internal: an :class:`~flowsched.store.AsyncTimerStore` face for a store that does no I/O.

:func:`as_async` wraps a synchronous store whose calls never block (the in-memory reference
store): each coroutine calls it directly on the loop. A store that does I/O is written as a
sync/async pair instead (never wrap a blocking store: it would stall the loop).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from flowsched.records import DeadLetter, ScheduleItem
from flowsched.steering import Attempt, TimerPage
from flowsched.store.interface import TimerStore
from flowsched.store.records import (
    Claim,
    QuarantinedRecord,
    Settlement,
    SettleResult,
    TimerSelection,
)

__all__ = ["AsyncOver", "as_async"]


class AsyncOver:
    """The async face of a non-blocking synchronous store (see :func:`as_async`)."""

    def __init__(self, store: TimerStore) -> None:
        self.sync = store

    def __repr__(self) -> str:
        return f"as_async({self.sync!r})"

    async def now(self) -> datetime:
        return self.sync.now()

    async def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        return self.sync.put(item, deadline=deadline)

    async def get(self, item_id: str) -> ScheduleItem | None:
        return self.sync.get(item_id)

    async def exists(self, item_id: str) -> bool:
        return self.sync.exists(item_id)

    async def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        return self.sync.remove(item_id, generation=generation, deadline=deadline)

    async def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        return self.sync.remove_flow(flow_id, deadline=deadline)

    async def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        return self.sync.claim_due(routes, owner, lease, limit)

    async def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        return self.sync.confirm_start(claims)

    async def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        return self.sync.renew(claims, lease)

    async def release(self, claims: Sequence[Claim]) -> int:
        return self.sync.release(claims)

    async def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        return self.sync.settle(settlements)

    async def next_due(
        self, routes: Collection[str], after: datetime | None = None
    ) -> datetime | None:
        return self.sync.next_due(routes, after)

    async def dead_letters(self) -> list[DeadLetter]:
        return self.sync.dead_letters()

    async def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        return self.sync.requeue(item_id, due)

    async def quarantined(self) -> list[QuarantinedRecord]:
        return self.sync.quarantined()

    async def timers(self, query: TimerSelection) -> TimerPage:
        return self.sync.timers(query)

    async def history(self, item_id: str) -> list[Attempt]:
        return self.sync.history(item_id)

    async def pause(self, item_id: str) -> bool:
        return self.sync.pause(item_id)

    async def resume(self, item_id: str) -> bool:
        return self.sync.resume(item_id)


def as_async(store: TimerStore) -> AsyncOver:
    """``store`` (synchronous, non-blocking) as an :class:`~flowsched.store.AsyncTimerStore`."""
    return AsyncOver(store)
