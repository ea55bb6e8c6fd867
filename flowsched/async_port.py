"""Internal: ``AsyncSchedulerPort``, the scheduler port's asyncio face.

The same calls as :class:`~flowsched.port.SchedulerPort`, with the same meaning, the same
items and the same delivery guarantees; what touches storage is a coroutine (``await
scheduler.schedule(item)``), what only wires handlers is a plain call (``subscribe``,
``register``, ``now``). Handlers may be ``async def`` (awaited on the scheduler's loop) or
plain functions (run in a worker thread, so that they never block the loop).

``async with scheduler:`` starts it on the running loop; on exit it waits for the handlers
in flight and leaves no task behind. A delivery cancelled by shutdown is not settled: the
item stays scheduled and is delivered again (by this scheduler once started again, by
another node of a shared store, or after a restart).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Self, Unpack

from flowsched.calendar import Calendar
from flowsched.port import (
    DeadLetter,
    Recurrence,
    ScheduleItem,
    ScheduleKind,
    recurring_item,
    single_timer_item,
)

if TYPE_CHECKING:
    from flowsched.handler_limits import HandlerOptions
    from flowsched.steering import Attempt

__all__ = ["AsyncHandler", "AsyncSchedulerPort"]

AsyncHandler = Callable[[ScheduleItem, int], Awaitable[object] | object]
"""``handler(item, attempt)``: an ``async def`` (awaited on the loop) or a plain function
(run in a worker thread). Return normally to complete the item; raise to have it
redelivered with backoff."""


class AsyncSchedulerPort(ABC):
    """The interface both asyncio scheduler adapters implement.

    ::

        async with AsyncInMemoryScheduler() as scheduler:
            scheduler.subscribe(ScheduleKind.TIMER, on_timer)   # async def on_timer(item, n)
            await scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, due))
    """

    calendars: Mapping[str, Calendar] = MappingProxyType({})
    """Named calendars, as :attr:`SchedulerPort.calendars` (``from_config`` sets them)."""

    @abstractmethod
    async def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item``, replacing any item with the same id; return it with its generation."""

    @abstractmethod
    def now(self) -> datetime:
        """The time on this scheduler's clock (timezone-aware UTC)."""

    async def create_single_timer(
        self,
        timer_id: str,
        delay: timedelta | datetime,
        handler: str,
        arg: Mapping[str, Any] | None = None,
    ) -> ScheduleItem:
        """As :meth:`SchedulerPort.create_single_timer`: a one-shot ``TIMER`` for the named
        ``handler``, due ``delay`` from now (or at ``delay``, an aware datetime)."""
        now = await self._now_for_due()
        return await self.schedule(single_timer_item(now, timer_id, delay, handler, arg))

    async def schedule_recurring(
        self,
        item_id: str,
        recurrence: Recurrence,
        kind: ScheduleKind = ScheduleKind.TIMER,
        flow_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        *,
        handler: str | None = None,
    ) -> ScheduleItem:
        """As :meth:`SchedulerPort.schedule_recurring`: slots counted from now (unless
        ``recurrence`` has a ``start``), the item due at its first slot."""
        now = await self._now_for_due()
        item = recurring_item(
            now, item_id, recurrence, kind, flow_id, payload, handler, self.calendars
        )
        return await self.schedule(item)

    async def _now_for_due(self) -> datetime:
        """The now a due time is counted from: :meth:`now` (an adapter that measures its
        clock against a server's measures it here when due)."""
        return self.now()

    @abstractmethod
    async def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` (not an error) if there was none. Once this has
        returned ``True``, the removed form never starts, on any node (the guarantees and
        errors of :meth:`SchedulerPort.cancel`)."""

    @abstractmethod
    async def cancel_flow(self, flow_id: str) -> int:
        """Remove every item of that flow instance; return how many were removed."""

    @abstractmethod
    async def exists(self, item_id: str) -> bool:
        """Whether the item is still scheduled (not fired successfully, not cancelled)."""

    @abstractmethod
    async def get(self, item_id: str) -> ScheduleItem | None:
        """The item as currently scheduled (its due time moves on redelivery), or ``None``."""

    @abstractmethod
    def subscribe(self, kind: ScheduleKind, handler: AsyncHandler) -> None:
        """Deliver due items of ``kind`` without a handler name to ``handler`` (``async
        def`` or plain); ``ValueError`` if the kind already has one."""

    @abstractmethod
    def register(self, name: str, handler: AsyncHandler, **options: Unpack[HandlerOptions]) -> None:
        """Deliver due items addressed to ``name`` to ``handler``; ``on_failed(dead_letter)``
        (a plain function) when one of them is dead-lettered. ``ValueError`` if ``name`` is
        invalid or already registered here. ``redelivery`` and ``timeout``: this handler's
        own policy and time limit, as on :meth:`SchedulerPort.register`; a timed-out
        ``async def`` handler is cancelled."""

    async def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first (see
        :meth:`SchedulerPort.history`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no delivery history")

    @abstractmethod
    async def dead_letters(self) -> list[DeadLetter]:
        """Items that exhausted ``max_attempts``, oldest first."""

    @abstractmethod
    async def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Move a dead letter back into the schedule (due now, or at ``due``), attempts reset."""

    @abstractmethod
    async def start(self) -> None:
        """Begin firing on the running event loop (idempotent)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop firing, wait for the handlers in flight, leave no task behind (idempotent)."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
