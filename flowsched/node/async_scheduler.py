"""Internal: :class:`AsyncNodeScheduler` - the asyncio port over any
:class:`~flowsched.store.AsyncTimerStore`, run by the node core and the asyncio driver.

The same core and rules as :class:`~flowsched.node.scheduler.NodeScheduler`; handlers may
be ``async def`` (awaited on the loop) or plain (run in a worker thread). A class for a new
store is a few lines::

    class AsyncPostgresScheduler(AsyncNodeScheduler):
        def __init__(self, pool, *, table="flowsched_timers", clock=None, **settings):
            super().__init__(AsyncPostgresTimerStore(pool, table, clock), clock=clock,
                             **settings)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from datetime import datetime, timedelta
from typing import Any, Unpack

from flowsched.async_delivery import AsyncDelivery
from flowsched.async_port import AsyncHandler, AsyncSchedulerPort
from flowsched.clock import ensure_utc
from flowsched.drivers.asyncio import AsyncioDriver
from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.handler_limits import HandlerOptions
from flowsched.node import steering
from flowsched.node.common import (
    NodeArgs,
    NodeFace,
    stored_item,
)
from flowsched.node.lost import LOST_TWICE, lost_run
from flowsched.node.write_fence import cancel_again_async
from flowsched.outcomes import Outcome
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.steering import Attempt, TimerInfo, TimerPage
from flowsched.store.interface import AsyncTimerStore
from flowsched.store.records import Claim

__all__ = ["AsyncNodeScheduler"]


async def _given(outcome: Outcome) -> Outcome:
    return outcome


class AsyncNodeScheduler(NodeFace[AsyncTimerStore, AsyncioDriver], AsyncSchedulerPort):
    """The asyncio port over ``store`` (see :class:`~flowsched.node.scheduler.NodeScheduler`
    for the guarantees, which are the same)."""

    def __init__(self, store: AsyncTimerStore, **options: Unpack[NodeArgs]) -> None:
        self._wire(store, options, AsyncioDriver, self._run, coroutines=True)
        self._deliver = AsyncDelivery(self._delivery, threads=self._core.settings.workers)
        self._started = self._closed = False
        self._closing: asyncio.Future[None] | None = None

    def _run(self, claim: Claim) -> Coroutine[Any, Any, Outcome]:
        # The delivery's own coroutine, awaited by the driver (no coroutine of its own around
        # it: one frame less per timer fired).
        if claim.lapsed >= LOST_TWICE:
            return _given(lost_run(self._delivery, claim))
        item = self._lost_slot(claim) if claim.lapsed else claim.item
        return self._deliver.run(item, claim.attempt)

    # -- the port ------------------------------------------------------------------

    async def schedule(self, item: ScheduleItem) -> ScheduleItem:
        item = stored_item(item)
        if self._closed:
            raise SchedulerUnavailable(f"schedule({item.id!r}): {type(self).__name__} is closed")
        async with self._fence.bounded_async(f"schedule({item.id!r})") as began:
            deadline = await self._fence.deadline_async(self._store.now, began)
            stored = await self._store.put(item, deadline=deadline)
        return self._put_done(stored)

    async def cancel(self, item_id: str) -> bool:
        """As :meth:`flowsched.node.scheduler.NodeScheduler.cancel`: once True, the old form
        never starts; ``history(item_id)`` shows a run that had already started."""
        if self._fence.op_timeout is None:  # no deadline and no budget to keep (write_fence)
            return self._remove_done(item_id, await self._store.remove(item_id))
        async with self._fence.bounded_async(f"cancel({item_id!r})") as began:
            deadline = await self._fence.deadline_async(self._store.now, began)
            try:
                removed = await self._store.remove(item_id, deadline=deadline)
            except OutcomeUnknown as unknown:  # its reply lost: was it applied?
                removed = await cancel_again_async(self._store, item_id, deadline, unknown)
        return self._remove_done(item_id, removed)

    async def cancel_flow(self, flow_id: str) -> int:
        if self._fence.op_timeout is None:  # no deadline and no budget to keep (write_fence)
            removed = await self._store.remove_flow(flow_id)
        else:
            async with self._fence.bounded_async(f"cancel_flow({flow_id!r})") as began:
                deadline = await self._fence.deadline_async(self._store.now, began)
                removed = await self._store.remove_flow(flow_id, deadline=deadline)
        return self._remove_flow_done(removed)

    async def exists(self, item_id: str) -> bool:
        return await self._store.exists(item_id)

    async def get(self, item_id: str) -> ScheduleItem | None:
        return await self._store.get(item_id)

    def subscribe(self, kind: ScheduleKind, handler: AsyncHandler) -> None:
        self._delivery.subscribe(kind, handler)
        self._routes_changed()

    def register(self, name: str, handler: AsyncHandler, **options: Unpack[HandlerOptions]) -> None:
        self._delivery.register(name, handler, **options)
        self._routes_changed()

    def _wake(self) -> None:
        """Wake the driver (from any thread: it hops onto its loop)."""
        self._driver.wake()

    async def dead_letters(self) -> list[DeadLetter]:
        return await self._store.dead_letters()

    async def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        when = await self._now_for_due() if due is None else ensure_utc(due, "requeue due")
        return self._requeue_done(await self._store.requeue(item_id, when))

    # -- steering (CONTRACT section 18) --------------------------------------------

    async def timers(self, **filters: Any) -> TimerPage:
        """One page, soonest due first, ties by id (see :mod:`flowsched.node.steering`)."""
        selected = steering.checked_selection(**filters)
        return await steering.async_page(self._store.timers, selected)

    def iter_timers(self, **filters: Any) -> AsyncIterator[TimerInfo]:
        """Every match, page after page (``async for``); the arguments are checked at the
        call."""
        return steering.async_pages(self._store.timers, steering.iter_selection(**filters))

    async def history(self, item_id: str) -> list[Attempt]:
        return await self._store.history(item_id)

    async def pause(self, item_id: str) -> bool:
        return await self._store.pause(item_id)

    async def resume(self, item_id: str) -> bool:
        return self._resume_done(await self._store.resume(item_id))

    async def _now_for_due(self) -> datetime:
        # The database's time is measured first when no sample is fresh (as the sync now).
        if (measured := self._measuring()) is not None:
            try:
                await self._store.now()
            except (SchedulerUnavailable, OSError):
                measured.postpone()
        return self.now()

    # -- lifecycle and virtual time ------------------------------------------------

    async def start(self) -> None:
        """Start firing on the running loop, or (on a manual clock) attach to it."""
        if self._closed:
            raise SchedulerUnavailable(f"start(): {type(self).__name__} is closed")
        if self._started:
            return
        self._started = True
        self._begin_firing()

    async def aclose(self, timeout: float | timedelta | None = None) -> None:
        """Stop firing, release queued claims, wait for handlers in flight (at most
        ``timeout`` seconds, default ``shutdown_timeout``; then they are cancelled and
        delivered again), leave no task behind; idempotent (a second call waits for the
        first)."""
        if timeout is not None and not isinstance(timeout, timedelta):
            timeout = timedelta(seconds=timeout)
        if self._closing is not None:
            if not self._driver.in_handler():  # a handler waiting would wait for itself
                await asyncio.shield(self._closing)
            return
        self._closing = asyncio.get_running_loop().create_future()
        self._closed = True
        try:
            if self._manual:
                self._clock.detach(self)  # type: ignore[attr-defined]
            await self._driver.close(timeout)
        finally:
            self._deliver.close()
            self._closing.set_result(None)

    async def run_due(self) -> int:
        """Deliver every item due by the clock's now, in this task; how many ran."""
        if self._closed:
            return 0
        return await self._driver.run_inline()

    async def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """For :meth:`~flowsched.ManualClock.advance_async` steps (as the sync twin's)."""
        if self._closed:
            return None
        when = await self._store.next_due(self._delivery.routes(), after)
        return when if when is not None and when <= until else None
