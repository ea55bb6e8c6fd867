"""A bounded pool of handler threads organised as leader/followers.

There is no separate timer thread: one idle worker at a time is the *leader*, which sleeps
until the earliest due time, claims what is due, hands all but the first claim to the
*followers* and runs the first one itself, after waking a follower to take over the lead.
The first delivery of every wake-up therefore costs one thread wake-up, not two (on a busy
two-core machine each extra hand-over between threads adds scheduling delay).

When every worker is busy in a handler nobody watches the clock; the first one to finish
leads again. That is the bound: at most ``size`` handlers run at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from flowsched.memory.store import Claim

__all__ = ["WorkerPool"]


class WorkerPool:
    """``size`` daemon threads delivering claims claimed by whichever of them leads.

    ``claim(batch)`` is called with ``lock`` held by the leader: it waits (releasing the lock)
    until claims are due, appends them to ``batch`` and returns True, or returns False once
    the owner is closing. ``deliver(claim)`` runs one claim's handler (no lock held)."""

    def __init__(
        self,
        size: int,
        lock: threading.Lock,
        claim: Callable[[list[Claim]], bool],
        deliver: Callable[[Claim], None],
        name: str = "flowsched-worker",
    ) -> None:
        self._lock = lock
        # Idle followers, each waiting on its own condition. Woken last-in first-out: under
        # light load the same two threads take turns, with warm caches, instead of all of
        # them rotating (measurably worse lateness on a busy two-core machine).
        self._idle: list[threading.Condition] = []
        self._claim = claim
        self._deliver = deliver
        self._ready: deque[Claim] = deque()
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
        leader). Records not yet started are dropped: they stay in the owner's store."""
        with self._lock:
            self._closed = True
            self._wake_followers(len(self._idle))
        me = threading.current_thread()
        for thread in self._threads:
            if thread is not me and thread.ident is not None:
                thread.join()

    def _work(self) -> None:
        ready, deliver = self._ready, self._deliver
        me = threading.Condition(self._lock)
        while not self._closed:
            try:
                claim = ready.popleft()
            except IndexError:
                taken = self._follow_or_lead(me)
                if taken is None:
                    return
                claim = taken
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
                # len(batch) - 1 claims for the followers, and one of them to lead next.
                self._wake_followers(len(batch))
                batch.clear()
                return first
        return None

    def _wake_followers(self, count: int) -> None:
        """Wake up to ``count`` idle followers, most recently idle first (lock held)."""
        idle = self._idle
        for _ in range(min(count, len(idle))):
            idle.pop().notify()
