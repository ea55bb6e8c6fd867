"""How the port's guarantees are tried on an asyncio adapter: the same checks as for a
synchronous one, through a blocking view of it, plus the guarantees only the async face has.

The checks of :mod:`flowsched.testing` are written once, against the synchronous port. To
try them on an :class:`~flowsched.async_port.AsyncSchedulerPort`, the scheduler lives on an
event loop in a thread of its own (a :class:`Portal`), and the check talks to it through
:class:`BlockingPort` (each call a coroutine run on that loop) and a :class:`LoopClock`
(a ManualClock whose ``advance`` is the loop's ``advance_async``). The checks' handlers
are plain functions: the adapter runs them in worker threads, from which their calls back
into the scheduler reach the loop the same way.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar, Unpack

from flowsched.async_port import AsyncSchedulerPort
from flowsched.clock import ManualClock
from flowsched.delivery import RedeliveryPolicy
from flowsched.handler_limits import HandlerOptions
from flowsched.port import (
    DeadLetter,
    Handler,
    ScheduleItem,
    ScheduleKind,
    SchedulerPort,
)
from flowsched.steering import Attempt, TimerInfo, TimerPage

__all__ = ["AsyncFactory", "AsyncRedeliveryFactory", "BlockingPort", "LoopClock", "Portal"]

T = TypeVar("T")

AsyncFactory = Callable[[ManualClock], AsyncSchedulerPort | Awaitable[AsyncSchedulerPort]]
"""``factory(clock)``: a new async scheduler on ``clock`` over empty storage (called on the
scheduler's event loop; it may be a coroutine function)."""

AsyncRedeliveryFactory = Callable[
    [ManualClock, RedeliveryPolicy], AsyncSchedulerPort | Awaitable[AsyncSchedulerPort]
]
"""``factory(clock, redelivery)``: the same, with that redelivery policy."""

CALL_TIMEOUT = 60.0
"""The longest one call through the portal may take (a hung adapter fails the check)."""


class Portal:
    """An event loop running in a daemon thread; :meth:`call` runs a coroutine on it and
    waits for its result from any other thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="flowsched-check-loop", daemon=True
        )
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a blocking call from the event loop's own thread would hang")
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout=CALL_TIMEOUT)

    def run(self, function: Callable[[], T]) -> T:
        """Call a plain ``function`` on the loop's thread (the adapter's state lives there)."""

        async def on_loop() -> T:
            return function()

        return self.call(on_loop())

    def close(self) -> None:
        async def tidy() -> None:
            me = asyncio.current_task()
            rest = [task for task in asyncio.all_tasks() if task is not me]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            self.call(tidy())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=CALL_TIMEOUT)
            self.loop.close()


class LoopClock(ManualClock):
    """A ManualClock whose ``advance`` runs ``advance_async`` on the portal's loop."""

    def __init__(self, portal: Portal, start: datetime) -> None:
        super().__init__(start)
        self._portal = portal

    def advance(self, delta: timedelta) -> datetime:
        return self._portal.call(self.advance_async(delta))


class BlockingPort(SchedulerPort):
    """A synchronous view of an async scheduler living on a :class:`Portal`'s loop."""

    def __init__(self, portal: Portal, scheduler: AsyncSchedulerPort) -> None:
        self._portal = portal
        self.scheduler = scheduler

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        return self._portal.call(self.scheduler.schedule(item))

    def now(self) -> datetime:
        return self.scheduler.now()

    def create_single_timer(self, *args: Any, **kwargs: Any) -> ScheduleItem:
        """The scheduler's own ``create_single_timer`` (the arguments of the port's)."""
        return self._portal.call(_awaited(self.scheduler.create_single_timer(*args, **kwargs)))

    def schedule_recurring(self, *args: Any, **kwargs: Any) -> ScheduleItem:
        """The scheduler's own ``schedule_recurring`` (the arguments of the port's)."""
        return self._portal.call(_awaited(self.scheduler.schedule_recurring(*args, **kwargs)))

    def cancel(self, item_id: str) -> bool:
        return self._portal.call(self.scheduler.cancel(item_id))

    def cancel_flow(self, flow_id: str) -> int:
        return self._portal.call(self.scheduler.cancel_flow(flow_id))

    def exists(self, item_id: str) -> bool:
        return self._portal.call(self.scheduler.exists(item_id))

    def get(self, item_id: str) -> ScheduleItem | None:
        return self._portal.call(self.scheduler.get(item_id))

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        self._portal.run(lambda: self.scheduler.subscribe(kind, handler))

    def register(self, name: str, handler: Handler, **options: Unpack[HandlerOptions]) -> None:
        self._portal.run(lambda: self.scheduler.register(name, handler, **options))

    def dead_letters(self) -> list[DeadLetter]:
        return self._portal.call(self.scheduler.dead_letters())

    def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        return self._portal.call(self.scheduler.requeue(item_id, due))

    def run_due(self) -> int:
        run_due: Callable[[], Awaitable[int]] | None = getattr(self.scheduler, "run_due", None)
        if run_due is None:
            raise AssertionError(f"{self.scheduler!r} has no run_due() (see AsyncClockDriven)")
        return self._portal.call(_awaited(run_due()))

    # -- steering (CONTRACT section 18): present when the async scheduler has them ------

    def timers(self, **filters: Any) -> TimerPage:
        timers: Callable[..., Awaitable[TimerPage]] = getattr(self.scheduler, "timers")  # noqa: B009
        return self._portal.call(_awaited(timers(**filters)))

    def iter_timers(self, **filters: Any) -> Iterator[TimerInfo]:
        """The async iterator's items, one ``__anext__`` at a time on the loop (the call
        itself runs there too, so an argument it refuses at once raises here)."""
        call: Callable[..., AsyncIterator[TimerInfo]] = getattr(self.scheduler, "iter_timers")  # noqa: B009
        iterator = self._portal.run(lambda: call(**filters))
        return self._pages(iterator)

    def _pages(self, iterator: AsyncIterator[TimerInfo]) -> Iterator[TimerInfo]:
        while True:
            try:
                yield self._portal.call(_awaited(anext(iterator)))
            except StopAsyncIteration:
                return

    def pause(self, item_id: str) -> bool:
        pause: Callable[[str], Awaitable[bool]] = getattr(self.scheduler, "pause")  # noqa: B009
        return self._portal.call(_awaited(pause(item_id)))

    def resume(self, item_id: str) -> bool:
        resume: Callable[[str], Awaitable[bool]] = getattr(self.scheduler, "resume")  # noqa: B009
        return self._portal.call(_awaited(resume(item_id)))

    @property
    def history(self) -> Callable[[str], list[Attempt]]:
        """The scheduler's ``history``, blocking; ``AttributeError`` when it has none (so
        ``hasattr(port, "history")`` tells, and the history guarantee is skipped)."""
        history: Callable[[str], Awaitable[list[Attempt]]] | None = getattr(
            self.scheduler, "history", None
        )
        if history is None:
            raise AttributeError(f"{self.scheduler!r} has no history()")
        return lambda item_id: self._portal.call(_awaited(history(item_id)))

    def start(self) -> None:
        self._portal.call(self.scheduler.start())

    def close(self) -> None:
        self._portal.call(self.scheduler.aclose())

    def __repr__(self) -> str:
        return f"BlockingPort({self.scheduler!r})"


async def _awaited(value: Awaitable[T]) -> T:
    return await value


async def built(
    factory: Callable[..., AsyncSchedulerPort | Awaitable[AsyncSchedulerPort]], *args: object
) -> AsyncSchedulerPort:
    """``factory(*args)`` on the loop, awaited if it gave an awaitable."""
    scheduler = factory(*args)
    if inspect.isawaitable(scheduler):
        return await scheduler
    return scheduler
