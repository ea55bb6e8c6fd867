"""Internal: ``AsyncInMemoryScheduler``, timers in process, fired on an asyncio event loop.

The same storage as :class:`~flowsched.memory.InMemoryScheduler` (a
:class:`~flowsched.memory.store.TimerStore`: heap + id map, fenced by the identity of the
stored form) and the same rules (:class:`~flowsched.delivery.DeliveryCore`); only the
driver differs: no lock and no thread of its own, every call runs on the loop, one firing
task sleeps until the earliest due time, and each delivery is a task
(:mod:`flowsched.async_delivery`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from concurrent.futures import Executor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Unpack

from flowsched.async_delivery import Alarm, AsyncDelivery, Deliveries, cancelled_from_outside
from flowsched.async_port import AsyncHandler, AsyncSchedulerPort
from flowsched.clock import Clock, SystemClock, attach_if_manual, detach_if_manual, ensure_utc
from flowsched.config.scheduler_settings import LONGEST_SETTING
from flowsched.delivery import (
    DeliveryCore,
    NextSlot,
    Observer,
    Outcome,
    Redeliver,
    RedeliveryPolicy,
    redelivery_policy,
)
from flowsched.history import HistoryPolicy, MemoryHistory, history_policy, local_node
from flowsched.memory.steering import AsyncMemorySteering
from flowsched.memory.store import Claim, TimerHeap
from flowsched.port import (
    DeadLetter,
    ScheduleItem,
    ScheduleKind,
    SchedulerUnavailable,
    not_an_item,
    set_generation,
)
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT, bounded_aclose, check_shutdown_timeout
from flowsched.steering import Attempt

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig
    from flowsched.handler_limits import HandlerOptions

__all__ = ["AsyncInMemoryScheduler"]

log = logging.getLogger("flowsched.memory")

CLAIM_BATCH = 64
"""Due items claimed (and their delivery tasks created) per turn of the firing task before
it yields to the loop: bounds how long one loop callback runs (a fraction of a millisecond;
asyncio's debug mode, which records where each task was created, is far slower)."""


class AsyncInMemoryScheduler(AsyncSchedulerPort, AsyncMemorySteering):
    """Timers in process, for asyncio services: the port's calls as coroutines.

    ``async def`` handlers are awaited on the loop; plain handlers run in a worker thread
    (``executor``, else the loop's default one). At most ``concurrency`` handlers run at
    once. Two ways to run it, as :class:`~flowsched.InMemoryScheduler`:

    * **Real time** (default :class:`~flowsched.clock.SystemClock`): ``async with
      scheduler:`` (or ``await scheduler.start()``) starts one firing task on the running
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
        handlers run. ``max_wait``: the longest the firing task sleeps before it reads the
        wall clock again (how late a jump of the wall clock can be noticed).
        ``shutdown_timeout``: how long :meth:`aclose` waits for handlers in flight."""
        self._shutdown_timeout = check_shutdown_timeout(shutdown_timeout)
        if not timedelta(0) < max_wait <= LONGEST_SETTING:
            raise ValueError(
                f"AsyncInMemoryScheduler max_wait must be positive and at most "
                f"{LONGEST_SETTING.days} days (got {max_wait})"
            )
        self._clock: Clock = clock or SystemClock()
        self._core = DeliveryCore(self._clock, redelivery, observer, coroutines=True)
        self._history = self._core.journal = MemoryHistory(self._clock.now, local_node(), history)
        self._observe_scheduled = self._core.observes_scheduled
        self._delivery = AsyncDelivery(self._core, executor)
        self._store = TimerHeap()
        self._generations = self._store.generations
        self._alarm = Alarm()
        self._deliveries = Deliveries(concurrency, self._alarm.ring)
        self._max_wait = max_wait.total_seconds()
        self._sleep_until: datetime | None = None
        self._firing: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        # Set while a delivery of this scheduler runs (a handler calling run_due() must not
        # recurse; aclose() from a handler must not wait for itself).
        self._delivering: contextvars.ContextVar[bool] = contextvars.ContextVar(
            f"flowsched-delivering-{id(self)}", default=False
        )
        self._manual = attach_if_manual(self._clock, self)

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

    # -- the port ------------------------------------------------------------------------

    async def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` under a fresh generation, replacing any item with its id; once
        this returns, the replaced form is never delivered again."""
        if item.__class__ is not ScheduleItem:
            not_an_item(item)
        if self._closed:
            raise SchedulerUnavailable(
                f"AsyncInMemoryScheduler is closed: cannot schedule {item.id!r}"
            )
        # TimerStore.schedule(), inlined: the hot path (bench/async_bench.py).
        if item.generation:
            stored = item.with_generation(next(self._generations))
        else:
            stored = item
            set_generation(item, next(self._generations))
        self._store.put(stored)
        until = self._sleep_until
        if until is not None and stored.due < until:
            self._alarm.ring()
        if self._observe_scheduled:
            self._core.scheduled(stored)
        return stored

    def now(self) -> datetime:
        return self._clock.now()

    async def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` if nothing is scheduled under ``item_id``."""
        if self._store.remove(item_id) is None:
            return False
        self._core.cancelled(item_id)
        return True

    async def cancel_flow(self, flow_id: str) -> int:
        """Remove every item whose ``flow_id`` is ``flow_id``; return how many."""
        ids = self._store.remove_flow(flow_id)
        for item_id in ids:
            self._core.cancelled(item_id)
        return len(ids)

    async def exists(self, item_id: str) -> bool:
        return self._store.get(item_id) is not None

    async def get(self, item_id: str) -> ScheduleItem | None:
        return self._store.get(item_id)

    async def pending(self) -> int:
        """How many items are scheduled (due or not, running or parked)."""
        return len(self._store)

    async def scheduled(self) -> list[ScheduleItem]:
        """A snapshot of the items scheduled (as :meth:`InMemoryScheduler.scheduled`)."""
        return list(self._store.items.values())

    def subscribe(self, kind: ScheduleKind, handler: AsyncHandler) -> None:
        """Deliver items of ``kind`` (without a handler name) to ``handler`` (``async def``
        or plain); items that waited for it are re-queued. ``ValueError`` if the kind
        already has a handler."""
        self._unpark(self._core.subscribe(kind, handler))

    def register(self, name: str, handler: AsyncHandler, **options: Unpack[HandlerOptions]) -> None:
        """Deliver items addressed to ``name`` to ``handler``; items that waited for it are
        re-queued (see :meth:`SchedulerPort.register`)."""
        self._unpark(self._core.register(name, handler, **options))

    async def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first (see :mod:`flowsched.history`)."""
        return self._history.history(item_id)

    def _unpark(self, route: str) -> None:
        if self._store.unpark(route):
            self._alarm.ring()

    async def dead_letters(self) -> list[DeadLetter]:
        return list(self._store.dead.values())

    async def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Schedule a dead letter again (due now, or at ``due``) under a fresh generation."""
        when = self._clock.now() if due is None else ensure_utc(due, "requeue due")
        item = self._store.requeue(item_id, when)
        if item is None:
            return False
        self._alarm.ring()
        log.info("requeued dead letter %s %s", item.kind.value, item.id)
        self._core.scheduled(item)
        return True

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the firing task on the running loop (none under a manual clock);
        idempotent."""
        if self._closed:
            raise SchedulerUnavailable("AsyncInMemoryScheduler is closed: it cannot start again")
        if self._started:
            return
        self._started = True
        if not self._manual:
            self._firing = asyncio.get_running_loop().create_task(
                self._fire(), name="flowsched-firing"
            )

    @bounded_aclose
    async def aclose(self, *, timeout: float | None = None) -> None:
        """Stop firing and wait for the handlers in flight (not for one calling
        ``aclose``); after ``timeout`` seconds (default: ``shutdown_timeout``) cancel those
        still running, which are then not settled, and log their items. Idempotent; no task
        is left behind (but a handler that ignores its cancellation)."""
        self._closed = True
        if self._manual:
            detach_if_manual(self._clock, self)
        firing, self._firing = self._firing, None
        if firing is not None and firing is not asyncio.current_task():
            firing.cancel()
            await asyncio.gather(firing, return_exceptions=True)
        await self._deliveries.drain(timeout)

    # -- delivering ----------------------------------------------------------------------

    async def _fire(self) -> None:
        """The firing task: claim what is due, start its deliveries, sleep until more is.

        A bug in a turn is logged, and firing goes on after ``max_wait`` (an item claimed
        in that turn and not started stays in the store: never lost, never completed)."""
        while not self._closed:
            try:
                await self._turns()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("AsyncInMemoryScheduler: a firing turn failed; firing goes on")
                await asyncio.sleep(self._max_wait)

    async def _turns(self) -> None:
        store, clock, deliveries = self._store, self._clock, self._deliveries
        while not self._closed:
            room = min(deliveries.free, CLAIM_BATCH)
            now = clock.now()
            if room > 0:
                batch: list[Claim] = []
                store.pop_due_batch(now, self._core.routes(), room, batch)
                for claim in batch:
                    deliveries.spawn(self._deliver(claim))
                if len(batch) == room:
                    await asyncio.sleep(0)  # more may be due: let the deliveries start first
                    continue
            # Sleep until the earliest due time (at most max_wait: a wall-clock jump is
            # noticed within that), or until rung: an earlier item, a free slot, a re-queue.
            wait = self._max_wait
            if deliveries.free > 0:
                head = store.next_due()
                if head is not None:
                    wait = min(wait, (head - now).total_seconds())
            self._sleep_until = now + timedelta(seconds=wait)
            try:
                await self._alarm.sleep(wait)
            finally:
                self._sleep_until = None

    async def _deliver(self, claim: Claim) -> None:
        """One delivery task: fence, run, settle (a delivery cancelled by shutdown is put
        back as it was, unsettled)."""
        item = claim[0]
        # The fence, right before the handler: the claimed form must still be current.
        if self._store.items.get(item.id) is not item:
            return
        if self._closed:  # claimed, never started: back as it was
            self._store.restore(item)
            return
        token = self._delivering.set(True)
        try:
            outcome = await self._delivery.run(item, claim[1])
        except BaseException:
            self._store.restore(item)
            raise
        finally:
            self._delivering.reset(token)
        self._settle(item, outcome)

    def _settle(self, item: ScheduleItem, outcome: Outcome) -> None:
        if not self._store.settle(item, outcome):
            log.debug("outcome of stale delivery %s ignored (replaced or cancelled)", item.key)
            return
        if isinstance(outcome, Redeliver | NextSlot):
            until = self._sleep_until
            if until is not None and outcome.due < until:
                self._alarm.ring()

    # -- virtual time (ManualClock.advance_async) -----------------------------------------

    async def run_due(self) -> int:
        """Deliver every item due by the clock's now, one by one in due order, awaiting
        each; return how many ran. From inside one of its own handlers it returns 0 at once
        (the delivery loop already running picks up what became due)."""
        if self._delivering.get():
            return 0
        delivered = 0
        while not self._closed:
            claim = self._store.pop_due(self._clock.now(), self._core.routes())
            if claim is None:
                break
            # A task of its own, so that aclose() from elsewhere waits for it (or cancels it).
            try:
                await self._deliveries.spawn(self._deliver(claim))
            except asyncio.CancelledError:
                if cancelled_from_outside():
                    raise
                break  # the delivery, not this task, was cancelled: by a bounded aclose()
            delivered += 1
        return delivered

    async def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """The earliest due time at or before ``until`` (after ``after``) of an item this
        scheduler would deliver: how a ManualClock steps through time."""
        if self._closed:
            return None
        return self._store.next_due_between(until, after, self._core.routes())

    @property
    def needs_start(self) -> bool:
        """Whether it fires nothing until started (``async with`` or ``await start()``): on a
        real clock, never started and not closed. An ``AsyncFlowDomain`` built on one warns
        once, at its first timer."""
        return not (self._manual or self._started or self._closed)

    def __repr__(self) -> str:
        mode = "manual" if self._manual else "loop"
        return f"AsyncInMemoryScheduler(pending={len(self._store)}, {mode}, clock={self._clock!r})"
