"""Internal: ``InMemoryScheduler``, timers kept in process, testable with a manual clock.

The node core and its thread driver (:class:`~flowsched.node.scheduler.NodeScheduler`) over
the reference store, :class:`~flowsched.store.MemoryTimerStore`: what a node decides is the
core's, as for every other adapter. What is the in-memory scheduler's own: a manual clock
drives it from construction (no ``start()``), a claim holds for as long as its handler runs
(nothing else could run it: the timers live and die with this process), and the settings
that apply in process (``workers``, ``max_wait``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from flowsched.clock import Clock, SystemClock
from flowsched.config.scheduler_settings import LONGEST_SETTING, MAX_WORKERS
from flowsched.delivery import Observer
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy
from flowsched.memory.face import CLAIM_BATCH, HELD, MemoryFace, node_args
from flowsched.node.common import is_manual
from flowsched.node.scheduler import NodeScheduler
from flowsched.outcomes import Outcome
from flowsched.records import ScheduleItem
from flowsched.redelivery import RedeliveryPolicy
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT, check_shutdown_timeout, close_within
from flowsched.start_watch import StartWatch
from flowsched.steering import TimerInfo
from flowsched.store.memory import MemoryTimerStore
from flowsched.store.records import Claim

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig

__all__ = ["CLAIM_BATCH", "HELD", "InMemoryScheduler", "check_pool_arguments", "memory_store"]

log = logging.getLogger("flowsched.memory")


def check_pool_arguments(workers: int, max_wait: timedelta, who: str = "InMemoryScheduler") -> None:
    """``ValueError`` naming the bad value unless ``workers`` (handlers at once) is from 1
    to :data:`MAX_WORKERS` and ``max_wait`` (the longest sleep) positive and at most
    :data:`LONGEST_SETTING` - the bounds ``from_config`` applies too."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"{who} workers must be from 1 to {MAX_WORKERS} (got {workers})")
    if not timedelta(0) < max_wait <= LONGEST_SETTING:
        raise ValueError(
            f"{who} max_wait must be positive and at most {LONGEST_SETTING.days}"
            f" days (got {max_wait})"
        )


def memory_store(clock: Clock, history: HistoryPolicy | None) -> MemoryTimerStore:
    """The store of an in-memory scheduler on ``clock`` keeping ``history``."""
    policy = history or HistoryPolicy()
    return MemoryTimerStore(clock, history_limit=policy.limit, history_retention=policy.retention)


class InMemoryScheduler(MemoryFace, NodeScheduler):
    """Timers in process, delivered at least once.

    Two ways to run it:

    * **Real time** (default :class:`~flowsched.clock.SystemClock`): :meth:`start` (or ``with``)
      starts the node's loop and ``workers`` handler threads; the loop sleeps until the
      earliest due time (woken early by an earlier item, and every ``max_wait`` to notice
      wall-clock jumps), claims what is due and starts it on a free worker.
    * **Manual time** (a clock with ``attach``, such as :class:`~flowsched.clock.ManualClock`): no
      threads, no ``start()``. Every ``clock.advance(...)`` delivers, on the calling thread and
      before it returns, every item due by the new time, in due order (same due: schedule order),
      each with the clock at its due time, including items handlers schedule meanwhile. An item
      already due fires on the next advance, even ``advance(timedelta(0))``.

    :meth:`run_due` delivers what is due now on the calling thread, on either clock.

    Guarantees (see :class:`~flowsched.SchedulerPort`): replace, cancel and ``cancel_flow`` are
    fenced by id + generation (a claim is confirmed right before its handler runs, and its
    outcome applies only to the form it claimed). Handlers may call this scheduler. Items
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

    async_class = "AsyncInMemoryScheduler"

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
        """``workers``: handler threads (real time only); ``max_wait``: the longest the node's
        loop sleeps before it reads the wall clock again (``shutdown_timeout``: see close)."""
        check_pool_arguments(workers, max_wait)
        clock = clock or SystemClock()
        waits = check_shutdown_timeout(shutdown_timeout)
        options = node_args(clock, redelivery, observer, workers, max_wait, waits)
        super().__init__(memory_store(clock, history), **options)
        self._shutdown_timeout = shutdown_timeout
        # close() waits shutdown_timeout (close_within, which names the items left running);
        # the driver's own wait goes on behind it, in close_within's thread.
        self._driver.shutdown_timeout = 2 * shutdown_timeout + timedelta(seconds=1)
        self._memory: MemoryTimerStore = self._store  # type: ignore[assignment]
        self._max_wait = max_wait
        self._start_watch = StartWatch()
        self._watch_start = not is_manual(self._clock)  # until the first item or start()
        self._serve_all(self._run_or_release)

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

    def __repr__(self) -> str:
        mode = "manual" if self._manual else "threads"
        return f"InMemoryScheduler(pending={len(self._memory)}, {mode}, clock={self._clock!r})"

    def _run_or_release(self, claim: Claim) -> Outcome:
        try:
            return self._run(claim)
        except BaseException:
            self._store.release([claim])  # interrupted: deliverable again, not held forever
            raise

    # -- the port ------------------------------------------------------------------

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` under a fresh generation, replacing any item with its id.

        Once this returns, the replaced form is never delivered again (a delivery of it that
        already started may finish, and its outcome is then ignored)."""
        # The hot path: MemoryFace._put_here (NodeScheduler.schedule, inlined).
        stored = self._put_here(item)
        if self._watch_start:
            self._watch_start = False
            self._start_watch.arm(self, self._max_wait)
        return stored

    def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` if nothing is scheduled under ``item_id`` (see
        :meth:`NodeScheduler.cancel <flowsched.node.scheduler.NodeScheduler.cancel>`)."""
        item = self._to_cancel(item_id)
        return self._cancelled(item, super().cancel(item_id))

    def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Schedule a dead letter again (due now, or at ``due``) under a fresh generation."""
        return super().requeue(item_id, due) and self._requeued(item_id)

    def iter_timers(self, **filters: Any) -> Iterator[TimerInfo]:
        """Every match, page after page; the arguments (the cursor included) are checked at
        the call."""
        return super().iter_timers(**self._check_cursor(filters))

    def pending(self) -> int:
        """How many items are scheduled (due or not, running or paused): the pending gauge."""
        return len(self._memory)

    def scheduled(self) -> list[ScheduleItem]:
        """A snapshot of the items scheduled, as :meth:`pending` counts them (the console's)."""
        return self._memory.items()

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Start the node's loop and handler threads (none under a manual clock); idempotent."""
        if self._closed:
            raise SchedulerUnavailable("InMemoryScheduler is closed: it cannot start again")
        self._watch_start = False
        self._start_watch.stop()
        if self._manual:
            self._started = True  # attached since construction
            return
        super().start()

    def close(self) -> None:
        """Stop firing and wait for the handlers in flight (not for one calling ``close``),
        at most ``shutdown_timeout``: then return, logging the items left running."""
        self._start_watch.stop()
        close_within(super().close, self._shutdown_timeout, self._delivery, self)

    def _unstarted_head(self) -> tuple[bool, datetime | None]:
        """For the start watch: (still waiting for start, the earliest due item)."""
        return self.needs_start, self._store.next_due(self._delivery.routes())
