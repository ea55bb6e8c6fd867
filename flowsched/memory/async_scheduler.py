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
from flowsched.delivery import Observer, RedeliveryPolicy, redelivery_policy
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy, history_policy, local_node
from flowsched.memory.scheduler import (
    CLAIM_BATCH,
    HELD,
    NO_ROUTE,
    check_pool_arguments,
    memory_store,
)
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.common import is_manual, stored_item
from flowsched.outcomes import Outcome
from flowsched.records import ScheduleItem, log_fields
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT, aclose_within, check_shutdown_timeout
from flowsched.steering import TimerInfo
from flowsched.store.async_face import as_async
from flowsched.store.paging import decode_cursor
from flowsched.store.records import Claim

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig

__all__ = ["AsyncInMemoryScheduler"]

log = logging.getLogger("flowsched.memory")


class AsyncInMemoryScheduler(AsyncNodeScheduler):
    """Timers in process, for asyncio services: the port's calls as coroutines.

    ``async def`` handlers are awaited on the loop; plain handlers run in a worker thread
    (``executor``, else the loop's default one). At most ``concurrency`` handlers run at
    once. Two ways to run it, as :class:`~flowsched.InMemoryScheduler`:

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

    settle_here = True

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
        super().__init__(
            as_async(self._memory),
            clock=clock,
            redelivery=redelivery,
            observer=observer,
            node_id=local_node(),
            workers=concurrency,
            batch_size=CLAIM_BATCH,
            lease=HELD,
            poll_interval=max_wait,
            shutdown_timeout=2 * shutdown_timeout + timedelta(seconds=1),  # see aclose
        )
        self._deliver = AsyncDelivery(self._delivery, executor)
        self._put = self._memory.put
        self._observe_scheduled = self._delivery.observes_scheduled
        # Claim even with no handler yet: a due item of a route nobody serves is set aside
        # (and logged) once, as it comes due.
        self._core.routes = self._driver.routes = self._serving
        self._driver.run_handler = self._run_or_release
        if is_manual(self._clock):
            self._clock.attach(self)  # type: ignore[attr-defined]

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
        settings = config.scheduler_settings()
        scheduler = cls(
            clock=clock,
            redelivery=redelivery_policy(settings),
            observer=observer,
            concurrency=concurrency,
            shutdown_timeout=settings.shutdown_timeout,
            history=history_policy(settings),
        )
        scheduler.calendars = settings.calendars
        return scheduler

    def __repr__(self) -> str:
        mode = "manual" if self._manual else "loop"
        pending = len(self._memory)
        return f"AsyncInMemoryScheduler(pending={pending}, {mode}, clock={self._clock!r})"

    def _serving(self) -> frozenset[str]:
        return self._delivery.routes() or NO_ROUTE

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
        # The hot path (bench/async_bench.py): AsyncNodeScheduler.schedule, inlined.
        if item.__class__ is not ScheduleItem:
            stored_item(item)
        if self._closed:
            raise SchedulerUnavailable(
                f"AsyncInMemoryScheduler is closed: cannot schedule {item.id!r}"
            )
        stored = self._put(item)
        if self._observe_scheduled:
            self._delivery.scheduled(stored)
        look_at = self._core.look_at  # None: the node claims at once anyway
        if look_at is not None and stored.due < look_at:
            self._driver.wake_at(stored.due)
        return stored

    async def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` if nothing is scheduled under ``item_id``."""
        item = self._memory.get(item_id) if log.isEnabledFor(logging.DEBUG) else None
        removed = await super().cancel(item_id)
        if removed and item is not None:
            log.debug("cancelled %s %s", item.kind.value, item_id, extra=log_fields(item))
        return removed

    async def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Schedule a dead letter again (due now, or at ``due``) under a fresh generation."""
        if not await super().requeue(item_id, due):
            return False
        item = self._memory.get(item_id)
        if item is not None:
            log.info("requeued dead letter %s %s", item.kind.value, item.id, extra=log_fields(item))
            self._delivery.scheduled(item)
        return True

    def iter_timers(self, **filters: Any) -> AsyncIterator[TimerInfo]:
        """Every match, page after page (``async for``); the arguments (the cursor
        included) are checked at the call."""
        after = filters.get("after")
        if isinstance(after, str):
            decode_cursor(after)  # this store's cursor: a ValueError naming ``after``
        return super().iter_timers(**filters)

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

    @property
    def needs_start(self) -> bool:
        """Whether it fires nothing until started (``async with`` or ``await start()``): on a
        real clock, never started and not closed. An ``AsyncFlowDomain`` built on one warns
        once, at its first timer."""
        return not (self._manual or self._started or self._closed)
