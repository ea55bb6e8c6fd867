"""Internal: the in-memory scheduler's handler threads, a bounded leader/followers pool.

There is no separate timer thread: one idle worker at a time is the *leader*, which sleeps
until the earliest due time, claims what is due (a bounded batch), wakes one follower to lead
next, and starts delivering the batch itself. The first delivery of every wake-up therefore
costs one thread wake-up, not two (on a busy two-core machine every hand-over between threads
adds scheduling delay).

The leader also watches the claims handed out: while some have waited longer than
``help_after`` (their handlers are slow, or block on I/O), it takes one itself, after waking
the next leader, which does the same; so blocking handlers soon have all ``size`` threads on
them, while handlers that return quickly are run by one or two. Under the GIL more threads
cannot run Python faster, and every extra runnable thread delays the leader's wake-up by up to
a GIL switch interval (measured: waking a follower per claim made the p99 lateness of a burst
of 50,000 timers tens of milliseconds).

When every worker is busy in a handler nobody watches the clock; the first one to finish
leads again. That is the bound: at most ``size`` handlers run at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from datetime import timedelta

from flowsched.config.scheduler_settings import LONGEST_SETTING, MAX_WORKERS
from flowsched.memory.store import Claim

__all__ = ["CLAIM_BATCH", "ThreadState", "WorkerPool", "check_pool_arguments"]

CLAIM_BATCH = 256
"""Due items the leader claims per hold of the scheduler's lock: bounds how long
``schedule()`` can wait for it, and how many claimed items wait for a free worker (the rest
stay in the heap, where replace and cancel are cheapest)."""


def check_pool_arguments(workers: int, max_wait: timedelta) -> None:
    """``ValueError`` naming the bad value unless ``workers`` (threads) is from 1 to
    :data:`MAX_WORKERS` and ``max_wait`` (the leader's longest sleep) positive and at most
    :data:`LONGEST_SETTING` - the bounds ``from_config`` applies too."""
    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(
            f"InMemoryScheduler workers must be from 1 to {MAX_WORKERS} (got {workers})"
        )
    if not timedelta(0) < max_wait <= LONGEST_SETTING:
        raise ValueError(
            f"InMemoryScheduler max_wait must be positive and at most {LONGEST_SETTING.days}"
            f" days (got {max_wait})"
        )


class ThreadState(threading.local):
    """Per thread: deliveries running on it (``close`` must not wait for its own caller) and
    whether it is draining inline (a handler that advances the clock must not recurse)."""

    depth = 0
    draining = False


ClaimDue = Callable[[list[Claim], float | None], bool]
"""``claim(batch, deadline)``: see :class:`WorkerPool`."""


class WorkerPool:
    """``size`` daemon threads delivering the items whichever of them leads has claimed.

    ``claim(batch, deadline)`` is called with ``lock`` held by the leader: it waits
    (releasing the lock) until items are due and appends their claims to ``batch``, or until
    the ``monotonic()`` time ``deadline`` (if not None) has passed, leaving ``batch`` empty;
    it returns False once the owner is closing. ``deliver(claim)`` runs one handler (no lock
    held)."""

    def __init__(
        self,
        size: int,
        lock: threading.Lock,
        claim: ClaimDue,
        deliver: Callable[[Claim], None],
        monotonic: Callable[[], float],
        name: str = "flowsched-worker",
        help_after: float = 0.005,
    ) -> None:
        self._lock = lock
        # Idle followers, each waiting on its own condition. Woken last-in first-out: under
        # light load the same two threads take turns, with warm caches, instead of all of
        # them rotating (measurably worse lateness on a busy two-core machine).
        self._idle: list[threading.Condition] = []
        self._claim = claim
        self._deliver = deliver
        self._monotonic = monotonic
        self._help_after = help_after
        self._ready: deque[Claim] = deque()
        self._handed_at = 0.0  # when claims in _ready were last handed out or helped
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
        """Wait as a follower while someone leads, else lead. None: closed."""
        with self._lock:
            while not self._closed:
                if self._leading:
                    self._idle.append(me)
                    me.wait()
                    if me in self._idle:  # not woken by a hand-over (defensive)
                        self._idle.remove(me)
                    continue
                taken = self._lead()
                if taken is not None or self._closed:
                    return taken
        return None

    def _lead(self) -> Claim | None:
        """Wait for due items or for claims waiting too long; take one (lock held)."""
        ready, batch = self._ready, self._batch
        deadline = self._handed_at + self._help_after if ready else None
        self._leading = True
        try:
            if not self._claim(batch, deadline):
                return None
        finally:
            self._leading = False
        if batch:
            ready.extend(batch[1:])
            taken = batch[0]
            batch.clear()
        else:
            # Claims waited past the deadline: help with one.
            try:
                taken = ready.popleft()
            except IndexError:  # drained meanwhile: lead on
                return None
        self._handed_at = self._monotonic()
        self._wake_followers(1)  # the next leader
        return taken

    def _wake_followers(self, count: int) -> None:
        """Wake up to ``count`` idle followers, most recently idle first (lock held)."""
        idle = self._idle
        for _ in range(min(count, len(idle))):
            idle.pop().notify()
