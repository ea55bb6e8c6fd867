"""Internal: in-memory delivery on the calling thread (``run_due``, a manual ``clock.advance``).

With a clock that has ``attach`` (a :class:`~flowsched.clock.ManualClock`) the in-memory
scheduler has no threads: ``clock.advance`` calls :meth:`InlineDelivery.run_due`, which
claims due items one at a time and delivers each before it returns.
"""

from __future__ import annotations

import threading

from flowsched.memory.outcomes import Outcomes
from flowsched.memory.store import Claim

__all__ = ["InlineDelivery", "ThreadState"]


class ThreadState(threading.local):
    """Per thread: deliveries running on it (``close`` must not wait for its own caller) and
    whether it is draining inline (a handler that advances the clock must not recurse)."""

    depth = 0
    draining = False


class InlineDelivery(Outcomes):
    """``run_due``: the due items delivered one by one on the calling thread."""

    _state: ThreadState
    _inflight: int
    """Deliveries claimed and not yet applied, which ``close()`` waits for."""

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
            outcome = self._run(claim)
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
