"""Internal: ``InMemoryScheduler``, timers kept in process, testable with a manual clock.

Top to bottom: the port's calls; delivery on the calling thread (``run_due``) and by worker
threads (the calls :class:`~flowsched.memory.pool.WorkerPool` makes); applying outcomes;
``start``, ``close``. Storage: ``memory.store``; rules: ``delivery``; steering: ``.steering``."""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Unpack

from flowsched.clock import Clock, SystemClock, attach_if_manual, detach_if_manual, ensure_utc
from flowsched.delivery import DeliveryCore, NextSlot, Observer, Outcome, Redeliver
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy, MemoryHistory, local_node
from flowsched.memory.pool import CLAIM_BATCH, ThreadState, WorkerPool, check_pool_arguments
from flowsched.memory.steering import MemorySteering
from flowsched.memory.store import Claim, TimerHeap
from flowsched.port import Handler, SchedulerPort
from flowsched.records import (
    DeadLetter,
    ScheduleItem,
    ScheduleKind,
    log_fields,
    not_an_item,
    set_generation,
)
from flowsched.redelivery import RedeliveryPolicy
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT, bounded_close, check_shutdown_timeout
from flowsched.start_watch import NOT_STARTED, StartWatch
from flowsched.steering import Attempt

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig
    from flowsched.handler_limits import HandlerOptions

__all__ = ["InMemoryScheduler"]

log = logging.getLogger("flowsched.memory")


class InMemoryScheduler(SchedulerPort, MemorySteering):
    """Timers in process: a lazy-deletion heap plus an id map, delivered at least once.

    Two ways to run it:

    * **Real time** (default :class:`~flowsched.clock.SystemClock`): :meth:`start` (or ``with``)
      starts ``workers`` handler threads; one idle worker sleeps until the earliest due time
      (woken early by an earlier item, and every ``max_wait`` to notice wall-clock jumps),
      claims what is due and delivers it while another takes over (:mod:`flowsched.memory.pool`).
    * **Manual time** (a clock with ``attach``, such as :class:`~flowsched.clock.ManualClock`): no
      threads, no ``start()``. Every ``clock.advance(...)`` delivers, on the calling thread and
      before it returns, every item due by the new time, in due order (same due: schedule order),
      each with the clock at its due time, including items handlers schedule meanwhile. An item
      already due fires on the next advance, even ``advance(timedelta(0))``.

    :meth:`run_due` delivers what is due now on the calling thread, on either clock.

    Guarantees (see :class:`~flowsched.SchedulerPort`): replace, cancel and ``cancel_flow`` are
    fenced by id + generation (claimed under the lock, checked again right before the handler,
    outcome applied only to the current form of its id). Handlers may call this scheduler. Items
    of a route nobody handles here stay scheduled, set aside once due, until a handler for them
    is subscribed or registered. After :meth:`close` ``schedule`` raises ``SchedulerUnavailable``.

    >>> from datetime import UTC, datetime, timedelta
    >>> from flowsched.clock import ManualClock
    >>> clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    >>> scheduler = InMemoryScheduler(clock=clock)
    >>> scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: print("fired", item.key))
    >>> stored = scheduler.schedule(
    ...     ScheduleItem("t-1", ScheduleKind.TIMER, clock.now() + timedelta(seconds=5)))
    >>> _ = clock.advance(timedelta(seconds=5))
    fired t-1#1
    >>> scheduler.exists("t-1")
    False
    """

    def __init__(
        self,
        clock: Clock | None = None,
        redelivery: RedeliveryPolicy | None = None,
        observer: Observer | None = None,
        workers: int = 8,
        *,
        max_wait: timedelta = timedelta(milliseconds=250),
        shutdown_timeout: timedelta = DEFAULT_SHUTDOWN_TIMEOUT,
        history: HistoryPolicy | None = None,
    ) -> None:
        """``workers``: handler threads (real time only); ``max_wait``: the longest the waiting
        worker sleeps before it reads the wall clock again (``shutdown_timeout``: see close)."""
        check_pool_arguments(workers, max_wait)
        self._shutdown_timeout = check_shutdown_timeout(shutdown_timeout)
        self._clock: Clock = clock or SystemClock()
        self._core = DeliveryCore(
            self._clock, redelivery, observer, async_class="AsyncInMemoryScheduler"
        )
        self._history = self._core.journal = MemoryHistory(self._clock.now, local_node(), history)
        # Skip the observer call on the schedule() hot path when nobody listens to it.
        self._observe_scheduled = self._core.observes_scheduled
        self._store = TimerHeap()
        self._generations = self._store.generations
        self._lock = threading.Lock()
        # The leading worker sleeps on it; close() waits on it for inline deliveries.
        self._wake = threading.Condition(self._lock)
        self._sleep_until: datetime | None = None
        self._state = ThreadState()
        self._inflight = 0
        self._closed = False
        self._started = False
        self._workers = workers
        self._max_wait = max_wait
        # Outcomes of worker deliveries, not yet applied (see _deliver_claimed and _settle).
        self._settling: deque[tuple[ScheduleItem, Outcome]] = deque()
        self._pool: WorkerPool | None = None
        self._manual = attach_if_manual(self._clock, self)
        # Unstarted on a real clock: the first schedule() "wakes the timer", arming the watch.
        self._start_watch = StartWatch()
        if not self._manual:
            self._sleep_until = NOT_STARTED

    @classmethod
    def from_config(
        cls,
        config: SchedulingConfig,
        *,
        clock: Clock | None = None,
        observer: Observer | None = None,
    ) -> InMemoryScheduler:
        """A scheduler with the ``ipf-scheduler.flowsched`` settings that apply in process:
        ``redelivery { initial, maximum, factor }``, ``max-attempts`` and ``workers`` (see
        ``docs/reference/configuration.md``; the MongoDB settings are not used here).

        >>> from flowsched import SchedulingConfig
        >>> config = SchedulingConfig.from_string("ipf-scheduler.flowsched.max-attempts = 5")
        >>> InMemoryScheduler.from_config(config).close()
        """
        from flowsched.memory.from_config import build  # (with the named calendars)

        return build(cls, config, clock, observer)

    # -- the port -----------------------------------------------------------------------

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` under a fresh generation, replacing any item with its id.

        Once this returns, the replaced form is never delivered again (a delivery of it that
        already started may finish, and its outcome is then ignored)."""
        # Hot path (bench/memory_bench.py): acquire/release is twice as fast as a with-block.
        if item.__class__ is not ScheduleItem:
            not_an_item(item)
        lock = self._lock
        lock.acquire()
        try:
            if self._settling:
                self._settle()
            if self._closed:
                raise SchedulerUnavailable(
                    f"InMemoryScheduler is closed: cannot schedule {item.id!r}"
                )
            if item.generation:
                # Already stored: a new form gets its own object (identity is the fence, store.py).
                stored = item.with_generation(next(self._generations))
            else:
                stored = item  # newly built: stored as it is, no copy
                set_generation(item, next(self._generations))
            self._store.put(stored)
            if self._sleep_until is not None and stored.due < self._sleep_until:
                self._wake_timer()
        finally:
            lock.release()
        if self._observe_scheduled:
            self._core.scheduled(stored)
        return stored

    def now(self) -> datetime:
        return self._clock.now()

    def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` if nothing is scheduled under ``item_id``."""
        with self._lock:
            self._settle()
            item = self._store.remove(item_id)
        if item is None:
            return False
        log.debug("cancelled %s %s", item.kind.value, item_id, extra=log_fields(item))
        self._core.cancelled(item_id)
        return True

    def cancel_flow(self, flow_id: str) -> int:
        """Remove every item whose ``flow_id`` is ``flow_id``; return how many."""
        with self._lock:
            self._settle()
            ids = self._store.remove_flow(flow_id)
        for item_id in ids:
            self._core.cancelled(item_id)
        return len(ids)

    def exists(self, item_id: str) -> bool:
        with self._lock:
            self._settle()
            return self._store.get(item_id) is not None

    def get(self, item_id: str) -> ScheduleItem | None:
        with self._lock:
            self._settle()
            return self._store.get(item_id)

    def pending(self) -> int:
        """How many items are scheduled (due or not, running or parked): the pending gauge."""
        with self._lock:
            self._settle()
            return len(self._store)

    def scheduled(self) -> list[ScheduleItem]:
        """A snapshot of the items scheduled, as :meth:`pending` counts them (the console's)."""
        with self._lock:
            self._settle()
            return list(self._store.items.values())

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        """Deliver items of ``kind`` (without a handler name) to ``handler``; items that
        waited for it are re-queued. ``ValueError`` if the kind already has a handler."""
        self._unpark(self._core.subscribe(kind, handler))

    def register(self, name: str, handler: Handler, **options: Unpack[HandlerOptions]) -> None:
        """Deliver items addressed to ``name`` to ``handler`` (see
        :meth:`SchedulerPort.register`); items that waited for it are re-queued."""
        self._unpark(self._core.register(name, handler, **options))

    def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first (see :mod:`flowsched.history`)."""
        return self._history.history(item_id)

    def _unpark(self, route: str) -> None:
        with self._lock:
            self._settle()
            if self._store.unpark(route):
                self._wake_timer()

    def dead_letters(self) -> list[DeadLetter]:
        with self._lock:
            self._settle()
            return list(self._store.dead.values())

    def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Schedule a dead letter again (due now, or at ``due``) under a fresh generation."""
        when = self._clock.now() if due is None else ensure_utc(due, "requeue due")
        with self._lock:
            self._settle()
            item = self._store.requeue(item_id, when)
            if item is not None:
                self._wake_timer()
        if item is None:
            return False
        log.info("requeued dead letter %s %s", item.kind.value, item.id, extra=log_fields(item))
        self._core.scheduled(item)
        return True

    # -- delivery on the calling thread (manual clock, run_due) ----------------------------

    def run_due(self) -> int:
        """Deliver every item due by the clock's now on the calling thread; return how many.

        Called from inside a handler that is itself being delivered inline (for instance one
        that advances a manual clock) it returns 0 at once: the delivery loop already running
        on this thread picks up whatever became due."""
        state = self._state
        if state.draining:
            return 0
        state.draining = True
        delivered = 0
        try:
            while True:
                with self._lock:
                    self._settle()
                    if self._closed:
                        break
                    claim = self._store.pop_due(self._clock.now(), self._core.routes())
                    if claim is None:
                        break
                    # Claimed (fence checked) under the lock; close() waits for it.
                    self._inflight += 1
                self._deliver_inline(claim)
                delivered += 1
        finally:
            state.draining = False
        return delivered

    def _deliver_inline(self, claim: Claim) -> None:
        """Deliver an item claimed (and counted in flight) by :meth:`run_due`."""
        state = self._state
        state.depth += 1
        try:
            outcome = self._core.run(*claim)
        except BaseException:
            with self._lock:
                self._inflight -= 1
                self._store.restore(claim[0])
                self._wake.notify_all()
            raise
        finally:
            state.depth -= 1
        with self._lock:
            self._settle()
            self._inflight -= 1
            self._apply(claim[0], outcome)
            if self._closed:
                self._wake.notify_all()

    # -- delivery by worker threads (see memory/pool.py) ------------------------------------

    def _claim(self, batch: list[Claim], deadline: float | None) -> bool:
        """The leading worker, lock held: wait until items are due and claim up to a batch of
        them, or until the monotonic ``deadline`` passes (batch left empty); False once
        closed. See :class:`~flowsched.memory.pool.WorkerPool`."""
        clock = self._clock
        while not self._closed:
            self._settle()
            now = clock.now()
            self._store.pop_due_batch(now, self._core.routes(), CLAIM_BATCH, batch)
            if batch:
                return True
            # Sleep in slices of at most max_wait: the wait runs on the monotonic clock, so a
            # jump of the wall clock is noticed within one slice (forward: what became due
            # fires once; backward: items wait for their due time, none is lost).
            until = self._store.wake_at(now + self._max_wait)
            timeout = (until - now).total_seconds()
            if deadline is not None:
                left = deadline - clock.monotonic()
                if left <= 0:
                    return True
                timeout = min(timeout, left)
            self._sleep_until = until
            self._wake.wait(timeout)
            self._sleep_until = None
        return False

    def _deliver_claimed(self, claim: Claim) -> None:
        """A worker delivers an item the leader claimed."""
        item = claim[0]
        # The fence, right before the handler: one dict lookup, atomic without the lock.
        # close() joins the workers, so a handler started here is waited for.
        if self._closed or self._store.items.get(item.id) is not item:
            return
        try:
            outcome = self._core.run(*claim)
        except BaseException:
            with self._lock:
                self._store.restore(item)
            raise
        if isinstance(outcome, Redeliver | NextSlot):
            # Rare: apply now, so that the leader can be woken for the item's new due time.
            with self._lock:
                self._settle()
                self._apply(item, outcome)
        else:
            # Workers never take the lock for a success (under the GIL that forms a convoy):
            # whoever next holds the lock applies the queued outcome first (see _settle).
            self._settling.append((item, outcome))

    # -- outcomes ----------------------------------------------------------------------------

    def _settle(self) -> None:
        """Apply the outcomes workers have queued (called under the lock, before anything else)."""
        settling = self._settling
        while settling:
            item, outcome = settling.popleft()
            self._apply(item, outcome)

    def _apply(self, item: ScheduleItem, outcome: Outcome) -> None:
        """Apply a delivery's outcome if ``item`` is still current (under the lock)."""
        applied = self._store.settle(item, outcome)
        if applied and isinstance(outcome, Redeliver | NextSlot):
            until = self._sleep_until
            if until is not None and outcome.due < until:
                self._wake_timer()  # the leader sleeps past the item's new due time
        elif not applied:
            message = "outcome of stale delivery %s ignored (replaced or cancelled meanwhile)"
            log.debug(message, item.key, extra=log_fields(item))

    def _wake_timer(self) -> None:
        """Make the leading worker look at the heap again (called under the lock)."""
        if self._sleep_until is NOT_STARTED:  # the first item before start(): watch it
            self._start_watch.arm(self, self._max_wait)
        self._sleep_until = None
        self._wake.notify()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker threads (none under a manual clock); idempotent."""
        with self._lock:
            if self._closed:
                raise SchedulerUnavailable("InMemoryScheduler is closed: it cannot start again")
            if self._started:
                return
            self._started = True
            self._start_watch.stop()
            if self._sleep_until is NOT_STARTED:
                self._sleep_until = None
            if self._manual:
                return
            pool = (self._workers, self._lock, self._claim, self._deliver_claimed)
            self._pool = WorkerPool(*pool, self._clock.monotonic)
        self._pool.start()

    @bounded_close
    def close(self) -> None:
        """Stop firing and wait for the handlers in flight (not for one calling ``close``),
        at most ``shutdown_timeout``: then return, logging the items left running."""
        with self._lock:
            self._closed = True
            self._sleep_until = None
            self._start_watch.stop()
            self._wake.notify_all()  # the leading worker, and close() calls waiting below
        if self._manual:
            detach_if_manual(self._clock, self)
        if self._pool is not None:
            self._pool.close()
        own = self._state.depth
        with self._lock:
            while self._inflight > own:
                self._wake.wait()
            self._settle()

    def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """The earliest due time at or before ``until`` (after ``after``): how a
        :class:`~flowsched.clock.ManualClock` steps (:meth:`TimerHeap.next_due_between`)."""
        with self._lock:
            self._settle()
            if self._closed:
                return None
            return self._store.next_due_between(until, after, self._core.routes())

    @property
    def needs_start(self) -> bool:
        """Whether it waits for :meth:`start` to fire anything (real clock, never started)."""
        return not (self._manual or self._started or self._closed)

    def _unstarted_head(self) -> tuple[bool, datetime | None]:
        """For the start watch: (still waiting for start, the earliest due item)."""
        with self._lock:
            return self.needs_start, self._store.next_due()

    def __repr__(self) -> str:
        mode = "manual" if self._manual else "threads"
        return f"InMemoryScheduler(pending={len(self._store)}, {mode}, clock={self._clock!r})"
