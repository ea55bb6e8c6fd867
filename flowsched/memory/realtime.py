"""Internal: in-memory delivery in real time: the leader claims due items, workers run them.

The threads themselves are :class:`~flowsched.memory.pool.WorkerPool`; this module gives it
the two calls it makes on the scheduler: wait for due items and claim a batch of them, and
deliver one claim.
"""

from __future__ import annotations

from datetime import timedelta

from flowsched.delivery import NextSlot, Redeliver
from flowsched.memory.outcomes import Outcomes
from flowsched.memory.store import Claim

__all__ = ["ThreadedDelivery"]

CLAIM_BATCH = 256
"""Due items claimed per hold of the lock: bounds how long ``schedule()`` can wait for it,
and how many claimed items wait for a free worker (the rest stay in the heap, where
replace and cancel are cheapest)."""


class ThreadedDelivery(Outcomes):
    """The leader's claim and a worker's delivery, as :class:`WorkerPool` calls them."""

    _max_wait: timedelta
    """The longest the leading worker sleeps before it reads the wall clock again."""

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
            until = now + self._max_wait
            head = self._store.next_due()
            if head is not None and head < until:
                until = head
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
        # The fence, right before the handler: one dict lookup, atomic without the lock (it
        # reads the id's current form at one instant, as a locked read would). close()
        # joins the workers, so a handler started here is waited for.
        if self._closed or self._store.items.get(item.id) is not item:
            return
        try:
            outcome = self._run(claim)
        except BaseException:
            with self._lock:
                self._store.restore(item)
            raise
        if isinstance(outcome, Redeliver | NextSlot):
            # Rare (a handler failed, or a recurring item moves on): apply now, so that the
            # leader can be woken for the item's new due time.
            with self._lock:
                self._settle()
                self._apply(item, outcome)
        else:
            # Workers never take the lock for a success: the outcome waits in a lock-free
            # queue that whoever next holds the lock applies first (every locked section
            # settles before it reads or changes anything), so nobody can observe it
            # unapplied. Blocking on the lock here would, under the GIL, form a convoy that
            # hands the lock and the GIL over on every delivery.
            self._settling.append((item, outcome))
