"""A bounded pool of handler threads organised as leader/followers.

There is no separate timer thread: one idle worker at a time is the *leader*, which sleeps
until the earliest due time, claims what is due (a bounded batch), wakes one follower to lead
next, and starts delivering the batch itself. The first delivery of every wake-up therefore
costs one thread wake-up, not two (on a busy two-core machine every hand-over between threads
adds scheduling delay).

More followers are woken only while claims wait: when a worker finds the oldest claimed batch
waiting longer than ``help_after``, it wakes one more. Handlers that return quickly are thus
run by one or two threads (under the GIL more threads cannot run Python faster, and every
extra runnable thread delays the leader's wake-up by up to a GIL switch interval), while
handlers that block (I/O) soon have all ``size`` threads on them.

When every worker is busy in a handler nobody watches the clock; the first one to finish
leads again. That is the bound: at most ``size`` handlers run at once.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from flowsched.memory.store import Claim

__all__ = ["WorkerPool"]


class WorkerPool:
    """``size`` daemon threads delivering the items whichever of them leads has claimed.

    ``claim(batch)`` is called with ``lock`` held by the leader: it waits (releasing the lock)
    until items are due, appends their claims to ``batch`` and returns True, or returns False
    once the owner is closing. ``deliver(claim)`` runs one handler (no lock held)."""

    def __init__(
        self,
        size: int,
        lock: threading.Lock,
        claim: Callable[[list[Claim]], bool],
        deliver: Callable[[Claim], None],
        name: str = "flowsched-worker",
        help_after: float = 0.002,
    ) -> None:
        self._lock = lock
        # Idle followers, each waiting on its own condition. Woken last-in first-out: under
        # light load the same two threads take turns, with warm caches, instead of all of
        # them rotating (measurably worse lateness on a busy two-core machine).
        self._idle: list[threading.Condition] = []
        self._claim = claim
        self._deliver = deliver
        self._help_after = help_after
        self._ready: deque[Claim] = deque()
        self._waiting_since = 0.0  # monotonic time claims in _ready last got a new helper
        self._batch: list[Claim] = []  # only the leader touches it
        self._leading = False
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(size)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stop taking claims and wait for the threads (the owner has already woken the
        leader). Claims not yet started are dropped: the items stay in the owner's store."""
        with self._lock:
            self._closed = True
            self._wake_followers(len(self._idle))
        me = threading.current_thread()
        for thread in self._threads:
            if thread is not me and thread.ident is not None:
                thread.join()

    def _work(self) -> None:
        ready, deliver, monotonic = self._ready, self._deliver, time.monotonic
        me = threading.Condition(self._lock)
        while not self._closed:
            try:
                claim = ready.popleft()
            except IndexError:
                taken = self._follow_or_lead(me)
                if taken is None:
                    return
                claim = taken
            if ready and self._idle and monotonic() - self._waiting_since > self._help_after:
                self._call_for_help()
            deliver(claim)

    def _follow_or_lead(self, me: threading.Condition) -> Claim | None:
        """Nothing ready: wait as a follower while someone leads, else lead. None: closed."""
        with self._lock:
            while not self._closed:
                try:
                    return self._ready.popleft()
                except IndexError:
                    pass
                if self._leading:
                    self._idle.append(me)
                    me.wait()
                    if me in self._idle:  # not woken by a hand-over (defensive)
                        self._idle.remove(me)
                    continue
                self._leading = True
                try:
                    claimed = self._claim(self._batch)
                finally:
                    self._leading = False
                if not claimed:
                    return None
                batch = self._batch
                first = batch[0]
                self._ready.extend(batch[1:])
                batch.clear()
                self._waiting_since = time.monotonic()
                self._wake_followers(1)  # the next leader
                return first
        return None

    def _call_for_help(self) -> None:
        """Claims have waited longer than ``help_after``: wake one more follower."""
        with self._lock:
            self._waiting_since = time.monotonic()
            self._wake_followers(1)

    def _wake_followers(self, count: int) -> None:
        """Wake up to ``count`` idle followers, most recently idle first (lock held)."""
        idle = self._idle
        for _ in range(min(count, len(idle))):
            idle.pop().notify()
