"""Internal: :class:`NodeScheduler` - the scheduler port over any
:class:`~flowsched.store.TimerStore`, run by the node core and the thread driver.

A scheduler class for a new store is a few lines: pass the store and keep the settings::

    class PostgresScheduler(NodeScheduler):
        async_class = "AsyncPostgresScheduler"

        def __init__(self, conninfo_or_pool, *, table="flowsched_timers", clock=None, **settings):
            super().__init__(PostgresTimerStore(conninfo_or_pool, table, clock), clock=clock,
                             **settings)

(and :class:`~flowsched.node.async_scheduler.AsyncNodeScheduler` the same way over an
:class:`~flowsched.store.AsyncTimerStore`). On a :class:`~flowsched.ManualClock` the
scheduler fires nothing by itself: once started it attaches to the clock, and every
``advance`` (or ``run_due()``) delivers what is due inline, one claim at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Unpack

from flowsched.clock import ensure_utc
from flowsched.drivers.threads import ThreadDriver
from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.handler_limits import HandlerOptions
from flowsched.node import steering
from flowsched.node.common import (
    NodeArgs,
    NodeFace,
    stored_item,
)
from flowsched.node.lost import LOST_TWICE, lost_run
from flowsched.node.write_fence import cancel_again
from flowsched.outcomes import Outcome
from flowsched.port import Handler, SchedulerPort
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.steering import Attempt, TimerInfo, TimerPage
from flowsched.store.interface import TimerStore
from flowsched.store.records import Claim

__all__ = ["NodeScheduler"]


class NodeScheduler(NodeFace[TimerStore, ThreadDriver], SchedulerPort):
    """The port (CONTRACT sections 4, 7, 15, 18) over ``store``: at least once, fenced
    claims, the check before each start (see :mod:`flowsched.node.core`)."""

    async_class = "the async twin of this scheduler"

    def __init__(self, store: TimerStore, **options: Unpack[NodeArgs]) -> None:
        self._wire(store, options, ThreadDriver, self._run, async_class=self.async_class)
        self._state = threading.Lock()
        self._started = self._closed = False

    def _run(self, claim: Claim) -> Outcome:
        if claim.lapsed >= LOST_TWICE:
            return lost_run(self._delivery, claim)
        item = self._lost_slot(claim) if claim.lapsed else claim.item
        return self._delivery.run(item, claim.attempt)

    def _open(self, what: str) -> None:
        if self._closed:
            raise SchedulerUnavailable(f"{what}: {type(self).__name__} is closed")

    # -- the port ------------------------------------------------------------------

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        item = stored_item(item)
        self._open(f"schedule({item.id!r})")
        with self._fence.bounded(f"schedule({item.id!r})") as began:
            deadline = self._fence.deadline(self._store.now, began)
            stored = self._store.put(item, deadline=deadline)
        return self._put_done(stored)

    def cancel(self, item_id: str) -> bool:
        """Remove the item; False if there was none. Once this returned True (or a
        replacing ``schedule`` returned), the old form never starts, on any node: a claim
        is confirmed with the store right before its handler runs. A delivery that had
        already started may finish; ``history(item_id)`` shows it (its last attempt open, or
        ended after this call, ``started`` before it)."""
        if self._fence.op_timeout is None:  # no deadline and no budget to keep (write_fence)
            return self._remove_done(item_id, self._store.remove(item_id))
        with self._fence.bounded(f"cancel({item_id!r})") as began:
            deadline = self._fence.deadline(self._store.now, began)
            try:
                removed = self._store.remove(item_id, deadline=deadline)
            except OutcomeUnknown as unknown:  # its reply lost: was it applied?
                removed = cancel_again(self._store, item_id, deadline, unknown)
        return self._remove_done(item_id, removed)

    def cancel_flow(self, flow_id: str) -> int:
        if self._fence.op_timeout is None:  # no deadline and no budget to keep (write_fence)
            removed = self._store.remove_flow(flow_id)
        else:
            with self._fence.bounded(f"cancel_flow({flow_id!r})") as began:
                deadline = self._fence.deadline(self._store.now, began)
                removed = self._store.remove_flow(flow_id, deadline=deadline)
        return self._remove_flow_done(removed)

    def exists(self, item_id: str) -> bool:
        return self._store.exists(item_id)

    def get(self, item_id: str) -> ScheduleItem | None:
        return self._store.get(item_id)

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        self._delivery.subscribe(kind, handler)
        self._routes_changed()

    def register(self, name: str, handler: Handler, **options: Unpack[HandlerOptions]) -> None:
        self._delivery.register(name, handler, **options)
        self._routes_changed()

    def dead_letters(self) -> list[DeadLetter]:
        return self._store.dead_letters()

    def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        when = self.now() if due is None else ensure_utc(due, "requeue due")
        return self._requeue_done(self._store.requeue(item_id, when))

    # -- steering (CONTRACT section 18) --------------------------------------------

    def timers(self, **filters: Any) -> TimerPage:
        """One page, soonest due first, ties by id (see :mod:`flowsched.node.steering`)."""
        return steering.sync_page(self._store.timers, steering.checked_selection(**filters))

    def iter_timers(self, **filters: Any) -> Iterator[TimerInfo]:
        """Every match, page after page; the arguments are checked at the call."""
        return steering.sync_pages(self._store.timers, steering.iter_selection(**filters))

    def history(self, item_id: str) -> list[Attempt]:
        return self._store.history(item_id)

    def pause(self, item_id: str) -> bool:
        return self._store.pause(item_id)

    def resume(self, item_id: str) -> bool:
        return self._resume_done(self._store.resume(item_id))

    def now(self) -> datetime:
        """The store's time where it measures its database's (measured first when no
        sample is fresh: due times count from it), else this scheduler's clock."""
        if (measured := self._measuring()) is not None:
            try:
                self._store.now()  # a sample of the database's time
            except (SchedulerUnavailable, OSError):
                measured.postpone()  # unreachable: the last estimate (or the host's) for now
        return self._time.now()

    # -- lifecycle and virtual time ------------------------------------------------

    def start(self) -> None:
        """Start firing: the loop and handler threads, or (on a manual clock) attach to it."""
        with self._state:
            self._open("start()")
            if self._started:
                return
            self._started = True
        self._begin_firing()

    def close(self) -> None:
        """Stop firing, release queued claims, wait for handlers in flight (at most
        ``shutdown_timeout``); idempotent."""
        with self._state:
            if self._closed:
                return
            self._closed = True
        if self._manual:
            self._clock.detach(self)  # type: ignore[attr-defined]
        self._driver.close()

    def run_due(self) -> int:
        """Deliver every item due by the clock's now, on this thread; return how many."""
        if self._closed:
            return 0
        return self._driver.run_inline()

    def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """For :class:`~flowsched.ManualClock` steps: the earliest claimable time at or
        before ``until`` (after ``after``), or None."""
        if self._closed:
            return None
        when = self._store.next_due(self._delivery.routes(), after)
        return when if when is not None and when <= until else None
