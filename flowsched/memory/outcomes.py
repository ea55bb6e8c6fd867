"""Internal: runs one claimed in-memory delivery and applies its outcome, if still current.

:class:`Outcomes` is the base of :class:`~flowsched.memory.InMemoryScheduler` that both ways
of delivering share (:mod:`flowsched.memory.inline` for a manual clock,
:mod:`flowsched.memory.realtime` for worker threads): it names the scheduler state they touch
and runs a claim through the delivery core. An outcome is applied under the scheduler's lock
and only to the form of the item the delivery was claimed for (see
:mod:`flowsched.memory.store`): a stale delivery never touches the form that replaced it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import UTC, datetime

from flowsched.clock import Clock
from flowsched.delivery import Completed, DeliveryCore, NextSlot, Outcome, Redeliver
from flowsched.memory.store import Claim, TimerStore
from flowsched.port import ScheduleItem

__all__ = ["NOT_STARTED", "Outcomes"]

log = logging.getLogger("flowsched.memory")

NOT_STARTED = datetime.max.replace(tzinfo=UTC)
"""``_sleep_until`` of a real-clock scheduler never started: later than any due time, so the
first ``schedule()`` wakes the (absent) timer, and that first wake arms the start watch."""


class Outcomes:
    """The scheduler state a delivery uses, running a claim, and applying what it returned.

    The attributes are set by :class:`~flowsched.memory.InMemoryScheduler`'s constructor."""

    _clock: Clock
    _core: DeliveryCore
    _store: TimerStore
    _lock: threading.Lock
    _wake: threading.Condition
    """The leading worker sleeps on it; ``close()`` waits on it for inline deliveries."""
    _sleep_until: datetime | None
    """Until when the leading worker sleeps (``None``: it is awake, or there is none)."""
    _settling: deque[tuple[ScheduleItem, Outcome]]
    """Outcomes of worker deliveries, not yet applied (see :meth:`_settle`)."""
    _closed: bool

    def _watch_unstarted(self) -> None:
        """Arm the watch that warns about due items while never started (the scheduler's)."""
        raise NotImplementedError

    def _run(self, claim: Claim) -> Outcome:
        """Call the handler through the delivery core; never raises an ``Exception``.

        A recurring item is delivered as the slot it ticks for. Its slot cannot run twice:
        the claimed form left the heap, and only this delivery's outcome (applied under the
        lock, fenced by identity) puts the item back, moved past the slot."""
        item, attempt = claim
        try:
            if item.recurrence is not None:
                ticked = self._core.tick(item)
                if isinstance(ticked, NextSlot):
                    return ticked
                item = ticked
            return self._core.deliver(item, attempt)
        except Exception as exc:
            # deliver() turns every handler error into an outcome and ignores observer
            # errors; this is a recurrence that cannot compute its slot. Redeliver rather
            # than lose the item.
            return self._core.failure(item, attempt, f"{type(exc).__name__}: {exc}")

    def _settle(self) -> None:
        """Apply the outcomes workers have queued (called under the lock, before anything else)."""
        settling = self._settling
        while settling:
            item, outcome = settling.popleft()
            self._apply(item, outcome)

    def _apply(self, item: ScheduleItem, outcome: Outcome) -> None:
        """Apply a delivery's outcome if ``item`` is still current (under the lock)."""
        store = self._store
        if isinstance(outcome, Completed):
            applied = store.complete(item)
        elif isinstance(outcome, Redeliver):
            applied = store.reschedule(item, outcome.due, outcome.attempt)
            until = self._sleep_until
            if applied and until is not None and outcome.due < until:
                self._wake_timer()
        elif isinstance(outcome, NextSlot):
            applied = store.advance(item, outcome.applied, outcome.due)
            until = self._sleep_until
            if applied and until is not None and outcome.due < until:
                self._wake_timer()
        else:
            applied = store.bury(item, outcome.dead)
        if not applied:
            log.debug(
                "outcome of stale delivery %s ignored (replaced or cancelled meanwhile)",
                item.key,
                extra={"item_id": item.id, "kind": item.kind.value},
            )

    def _wake_timer(self) -> None:
        """Make the leading worker look at the heap again (called under the lock)."""
        if self._sleep_until is NOT_STARTED:  # the first item before start(): watch it
            self._watch_unstarted()
        self._sleep_until = None
        self._wake.notify()
