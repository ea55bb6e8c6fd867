"""Internal: ``AsyncInMemoryScheduler``, timers in process, fired on an asyncio event loop.

The node core and its asyncio driver (:class:`~flowsched.node.async_scheduler.AsyncNodeScheduler`)
over the same store as :class:`~flowsched.InMemoryScheduler`
(:class:`~flowsched.store.MemoryTimerStore`, through :func:`~flowsched.store.as_async`: it
does no I/O, so each call runs on the loop). What is its own is what
:mod:`flowsched.memory.scheduler` says of the threaded one, with ``concurrency`` handlers
at once and plain handlers run in ``executor``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from flowsched.async_delivery import AsyncDelivery
from flowsched.clock import Clock, SystemClock
from flowsched.delivery import Observer, RedeliveryPolicy
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy
from flowsched.memory.face import MemoryFace, node_args
from flowsched.memory.scheduler import check_pool_arguments, memory_store
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.outcomes import Outcome
from flowsched.records import ScheduleItem
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT, aclose_within, check_shutdown_timeout
from flowsched.steering import TimerInfo
from flowsched.store.async_face import as_async
from flowsched.store.records import Claim

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig

__all__ = ["AsyncInMemoryScheduler"]

log = logging.getLogger("flowsched.memory")


class AsyncInMemoryScheduler(MemoryFace, AsyncNodeScheduler):
    """Timers in process, for asyncio services: the port's calls as coroutines.

    ``async def`` handlers are awaited on the loop; plain handlers run in a worker thread
    (``executor``, else a pool of its own, a thread per slot). At most ``concurrency``
    handlers run at once. Two ways to run it, as :class:`~flowsched.InMemoryScheduler`:

    * **Real time** (default :class:`~flowsched.clock.SystemClock`): ``async with
      scheduler:`` (or ``await scheduler.start()``) starts the node's task on the running
      loop, which sleeps until the earliest due time (woken early by an earlier item, and
      at least every ``max_wait``), claims what is due and starts a task per delivery.
    * **Manual time** (a :class:`~flowsched.clock.ManualClock`): no task at all; ``await
      clock.advance_async(delta)`` delivers every item due on the way, each at its due time,
      in order, follow-ups included, before it returns.

    On exit (``aclose()``) nothing more is claimed, the handlers in flight finish (after
    ``timeout`` seconds, if given, those still running are cancelled), and no task is left
    behind. A delivery cancelled by shutdown is not settled: its item stays scheduled,
    its failure not counted. Every call must come from the loop's thread (a plain handler,
    in its worker thread, reaches the scheduler with
    ``asyncio.run_coroutine_threadsafe(scheduler.schedule(item), loop)``).

    >>> import asyncio
    >>> from datetime import UTC, datetime, timedelta
    >>> from flowsched import ManualClock, ScheduleItem, ScheduleKind
    >>> async def main() -> None:
    ...     clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    ...     async with AsyncInMemoryScheduler(clock=clock) as scheduler:
    ...         async def on_timer(item: ScheduleItem, attempt: int) -> None:
    ...             print("fired", item.key)
    ...         scheduler.subscribe(ScheduleKind.TIMER, on_timer)
    ...         await scheduler.schedule(
    ...             ScheduleItem("t-1", ScheduleKind.TIMER, clock.now() + timedelta(seconds=5)))
    ...         await clock.advance_async(timedelta(seconds=5))
    >>> asyncio.run(main())
    fired t-1#1
    """

    def __init__(
        self,
        clock: Clock | None = None,
        redelivery: RedeliveryPolicy | None = None,
        observer: Observer | None = None,
        *,
        concurrency: int = 100,
        executor: Executor | None = None,
        max_wait: timedelta = timedelta(milliseconds=250),
        shutdown_timeout: timedelta = DEFAULT_SHUTDOWN_TIMEOUT,
        history: HistoryPolicy | None = None,
    ) -> None:
        """``concurrency``: the most handlers running at once. ``executor``: where plain
        handlers run. ``max_wait``: the longest the node's task sleeps before it reads the
        wall clock again (how late a jump of the wall clock can be noticed).
        ``shutdown_timeout``: how long :meth:`aclose` waits for handlers in flight."""
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
        check_pool_arguments(1, max_wait, who="AsyncInMemoryScheduler")
        self._shutdown_timeout = check_shutdown_timeout(shutdown_timeout)
        clock = clock or SystemClock()
        self._memory = memory_store(clock, history)
        waits = 2 * shutdown_timeout + timedelta(seconds=1)  # see aclose
        options = node_args(clock, redelivery, observer, concurrency, max_wait, waits)
        super().__init__(as_async(self._memory), **options)
        self._serve_all(self._run_or_release)
        self._deliver = AsyncDelivery(self._delivery, executor, threads=concurrency)

    @classmethod
    def from_config(
        cls,
        config: SchedulingConfig,
        *,
        clock: Clock | None = None,
        observer: Observer | None = None,
        concurrency: int = 100,
    ) -> AsyncInMemoryScheduler:
        """A scheduler with the ``ipf-scheduler.flowsched`` settings that apply in process:
        ``redelivery { initial, maximum, factor }`` and ``max-attempts`` (``workers``, the
        synchronous scheduler's thread count, does not apply: see ``concurrency``), and the
        named ``calendars``."""
        from flowsched.memory.from_config import build

        return build(cls, config, clock, observer, concurrency=concurrency)

    def __repr__(self) -> str:
        mode = "manual" if self._manual else "loop"
        pending = len(self._memory)
        return f"AsyncInMemoryScheduler(pending={pending}, {mode}, clock={self._clock!r})"

    async def _run_or_release(self, claim: Claim) -> Outcome:
        try:
            return await self._run(claim)
        except BaseException:
            self._memory.release([claim])  # cancelled by shutdown: not settled, not held
            raise

    # -- the port ------------------------------------------------------------------

    async def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` under a fresh generation, replacing any item with its id; once
        this returns, the replaced form is never delivered again."""
        # The hot path: MemoryFace._put_here (AsyncNodeScheduler.schedule, inlined).
        return self._put_here(item)

    async def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` if nothing is scheduled under ``item_id``."""
        item = self._to_cancel(item_id)
        return self._cancelled(item, await super().cancel(item_id))

    async def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Schedule a dead letter again (due now, or at ``due``) under a fresh generation."""
        return await super().requeue(item_id, due) and self._requeued(item_id)

    def iter_timers(self, **filters: Any) -> AsyncIterator[TimerInfo]:
        """Every match, page after page (``async for``); the arguments (the cursor
        included) are checked at the call."""
        return super().iter_timers(**self._check_cursor(filters))

    async def pending(self) -> int:
        """How many items are scheduled (due or not, running or paused)."""
        return len(self._memory)

    async def scheduled(self) -> list[ScheduleItem]:
        """A snapshot of the items scheduled (as :meth:`InMemoryScheduler.scheduled`)."""
        return self._memory.items()

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Start the node's task on the running loop (none under a manual clock);
        idempotent."""
        if self._closed:
            raise SchedulerUnavailable("AsyncInMemoryScheduler is closed: it cannot start again")
        if self._manual:
            self._started = True  # attached since construction
            return
        await super().start()

    async def aclose(self, timeout: float | timedelta | None = None) -> None:
        """Stop firing and wait for the handlers in flight (not for one calling
        ``aclose``); after ``timeout`` seconds (default: ``shutdown_timeout``) cancel those
        still running, which are then not settled, and log their items. Idempotent; no task
        is left behind (but a handler that ignores its cancellation)."""
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        limit = self._shutdown_timeout.total_seconds() if timeout is None else timeout
        close = super().aclose
        await aclose_within(close, limit, self._delivery, self)
