"""Internal: ``InMemoryScheduler``, timers kept in process, testable with a manual clock.

The port's calls, ``start`` and ``close`` live here; delivering is in
:mod:`flowsched.memory.inline` (manual clock, ``run_due``) and
:mod:`flowsched.memory.realtime` (worker threads), both applying outcomes through
:mod:`flowsched.memory.outcomes`.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from flowsched.clock import Clock, SystemClock, ensure_utc
from flowsched.config.scheduler_settings import LONGEST_SETTING, MAX_WORKERS
from flowsched.delivery import (
    DeliveryCore,
    Observer,
    Outcome,
    RedeliveryPolicy,
    redelivery_policy,
)
from flowsched.memory.inline import InlineDelivery, ThreadState
from flowsched.memory.pool import WorkerPool
from flowsched.memory.realtime import ThreadedDelivery
from flowsched.memory.store import TimerStore
from flowsched.port import (
    DeadLetter,
    FailedHandler,
    Handler,
    ScheduleItem,
    ScheduleKind,
    SchedulerPort,
    SchedulerUnavailable,
    not_an_item,
    set_generation,
)

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig

__all__ = ["InMemoryScheduler"]

log = logging.getLogger("flowsched.memory")


class InMemoryScheduler(InlineDelivery, ThreadedDelivery, SchedulerPort):
    """Timers in process: a lazy-deletion heap plus an id map, delivered at least once.

    Two ways to run it:

    * **Real time** (default :class:`~flowsched.clock.SystemClock`): :meth:`start` (or ``with``)
      starts ``workers`` handler threads. One idle worker at a time sleeps until the earliest
      due time (woken early when an earlier item arrives, and at least every ``max_wait`` so
      that wall-clock jumps are noticed), claims what is due in a batch and delivers it,
      while another worker takes over the clock; more workers join while claimed items wait
      (see :mod:`flowsched.memory.pool`).
    * **Manual time** (a clock with ``attach``, such as
      :class:`~flowsched.clock.ManualClock`): no threads at all, no ``start()`` needed. Every
      ``clock.advance(...)`` delivers, on the calling thread and before it returns, every item
      due by the new time, in due order (same due: schedule order), each with the clock set
      to its due time, including items that handlers schedule or that fall due while it
      runs. Nothing fires until the clock is advanced; an item already due fires on the next
      advance, even ``advance(timedelta(0))``.

    :meth:`run_due` delivers what is due now on the calling thread, on either clock.

    Guarantees (see :class:`~flowsched.port.SchedulerPort`): replace, cancel and
    ``cancel_flow`` are fenced by id + generation: an item is claimed under the lock, checked
    again right before its handler starts, and its outcome is applied under the lock only if
    it is still the current form of its id. A handler may call ``schedule``/``cancel`` on
    this scheduler (no lock is held while it runs). Items of a route nobody handles here (a
    kind nobody subscribed to, a handler name nobody registered) stay scheduled, set aside
    once due, and are delivered once a handler for them is subscribed or registered. After
    :meth:`close` nothing fires and ``schedule`` raises
    :class:`~flowsched.port.SchedulerUnavailable`.

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
    ) -> None:
        """``workers``: handler threads (real time only), the most handlers running at once.
        ``max_wait``: the longest the waiting worker sleeps before it reads the wall clock
        again (how late a jump of the wall clock can be noticed)."""
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(
                f"InMemoryScheduler workers must be from 1 to {MAX_WORKERS} (got {workers})"
            )
        if not timedelta(0) < max_wait <= LONGEST_SETTING:
            raise ValueError(
                f"InMemoryScheduler max_wait must be positive and at most {LONGEST_SETTING.days}"
                f" days (got {max_wait})"
            )
        self._clock: Clock = clock or SystemClock()
        self._core = DeliveryCore(
            self._clock, redelivery, observer, async_class="AsyncInMemoryScheduler"
        )
        # Skip the observer call on the schedule() hot path when nobody listens to it.
        self._observe_scheduled = self._core.observes_scheduled  # read on the hot path
        self._store = TimerStore()
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
        attach = getattr(self._clock, "attach", None)
        self._manual = callable(attach)
        if attach is not None and self._manual:
            attach(self)

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
        >>> config = SchedulingConfig.from_string(
        ...     "ipf-scheduler.flowsched { max-attempts = 5, redelivery.initial = 1s }")
        >>> with InMemoryScheduler.from_config(config) as scheduler:
        ...     pass
        """
        settings = config.scheduler_settings()
        redelivery = redelivery_policy(settings)
        return cls(clock=clock, redelivery=redelivery, observer=observer, workers=settings.workers)

    # -- the port -----------------------------------------------------------------------

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` under a fresh generation, replacing any item with its id.

        Once this returns, the replaced form is never delivered again (a delivery of it that
        already started may finish, and its outcome is then ignored)."""
        # The hot path (see bench/memory_bench.py): explicit acquire/release is about twice
        # as fast as a with-block here.
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
                # Already stored (returned by a scheduler): a new form needs its own object,
                # the identity of a stored form being its fence (see memory/store.py).
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
        log.debug(
            "cancelled %s %s",
            item.kind.value,
            item_id,
            extra={"item_id": item_id, "kind": item.kind.value},
        )
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
            return item_id in self._store.items

    def get(self, item_id: str) -> ScheduleItem | None:
        with self._lock:
            self._settle()
            return self._store.items.get(item_id)

    def pending(self) -> int:
        """How many items are scheduled (due or not, running or parked): the pending gauge."""
        with self._lock:
            self._settle()
            return len(self._store)

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        """Deliver items of ``kind`` (without a handler name) to ``handler``; items that
        waited for it are re-queued (under a manual clock they fire on the next ``advance``).
        ``ValueError`` if the kind already has a handler."""
        self._unpark(self._core.subscribe(kind, handler))

    def register(
        self, name: str, handler: Handler, *, on_failed: FailedHandler | None = None
    ) -> None:
        """Deliver items addressed to ``name`` to ``handler`` (see
        :meth:`SchedulerPort.register`); items that waited for it are re-queued."""
        self._unpark(self._core.register(name, handler, on_failed))

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
        extra = {"item_id": item.id, "kind": item.kind.value}
        log.info("requeued dead letter %s %s", item.kind.value, item.id, extra=extra)
        self._core.scheduled(item)
        return True

    def start(self) -> None:
        """Start the worker threads (none under a manual clock); idempotent."""
        with self._lock:
            if self._closed:
                raise SchedulerUnavailable("InMemoryScheduler is closed: it cannot start again")
            if self._started:
                return
            self._started = True
            if self._manual:
                return
            self._pool = WorkerPool(
                self._workers,
                self._lock,
                self._claim,
                self._deliver_claimed,
                self._clock.monotonic,
            )
        self._pool.start()

    def close(self) -> None:
        """Stop firing and wait for the handlers in flight (not for one calling ``close``)."""
        with self._lock:
            self._closed = True
            self._sleep_until = None
            self._wake.notify_all()  # the leading worker, and close() calls waiting below
        if self._manual:
            detach = getattr(self._clock, "detach", None)
            if detach is not None:
                detach(self)
        if self._pool is not None:
            self._pool.close()
        own = self._state.depth
        with self._lock:
            while self._inflight > own:
                self._wake.wait()
            self._settle()

    def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """The earliest due time (at or before ``until``, after ``after`` if given) of a
        scheduled item: how a :class:`~flowsched.clock.ManualClock` steps through time.

        Items already due but for a route nobody handles here count until ``run_due`` sets
        them aside; ``after`` (asked only then) costs a scan of the items."""
        with self._lock:
            self._settle()
            if self._closed:
                return None
            head = self._store.next_due()
            if head is None or head > until:
                return None
            if after is None or head > after:
                return head
            routes = self._core.routes()
            later = (
                item.due
                for item in self._store.items.values()
                if after < item.due <= until and item.route in routes
            )
            return min(later, default=None)

    def __repr__(self) -> str:
        mode = "manual" if self._manual else "threads"
        return f"InMemoryScheduler(pending={len(self._store)}, {mode}, clock={self._clock!r})"
