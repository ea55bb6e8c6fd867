"""Internal: the handler threads of :mod:`flowsched.drivers.threads` — one shared queue and
at most ``size`` threads taking from it.

A hand-off is one ``SimpleQueue.put`` (no future, no condition, no semaphore per delivery,
as ``concurrent.futures.ThreadPoolExecutor`` makes): at the rates a node fires, those were a
large part of a timer's CPU. What is guaranteed:

* **A job never waits behind a slow one while fewer than ``size`` threads run jobs.** A
  thread that ended a job leaves a token as it comes for the next; each job handed in takes
  a token, or starts a new thread when there is none (the executor's idle semaphore, as a
  ``deque``): so every job has its own taker that runs no other job, until ``size`` threads
  are busy. Every
  thread not running a job takes from the one queue. A node hands out at most ``workers``
  jobs at once (its running handlers), so with ``size = workers`` none waits.
* **At most ``size`` threads**, started when none is free, or all at once ahead of the
  first job (:meth:`prestart`: a node's start, so that its first burst of deliveries does
  not wait for ``size`` thread starts), named ``{prefix}_{n}`` as the executor's.
* **Shutdown** (:meth:`shutdown`) lets each thread end its job and stop; it does not wait.
  When the interpreter exits with a scheduler never closed, every pool is shut down before
  the interpreter waits for its threads (as the executor's are): idle threads stop at once,
  one running a job keeps the interpreter until the job ends, as the executor's did.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["HandlerThreads", "interpreter_exiting"]

IDLE_CHECK = 1.0  # seconds an idle thread waits before it looks whether to stop

log = logging.getLogger("flowsched.node")

Job = tuple[Callable[[Any], None], Any]

_live: weakref.WeakSet[HandlerThreads] = weakref.WeakSet()
_exit = threading.Event()


def interpreter_exiting() -> bool:
    """Whether the interpreter has begun to exit (set before any executor is shut down)."""
    return _exit.is_set()


def _exiting() -> None:
    _exit.set()
    for threads in list(_live):
        threads.shutdown()


# Run as the interpreter exits, before it joins the threads (where concurrent.futures
# registers its own: ``threading._register_atexit`` is that hook, private but stable).
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_exiting)


class HandlerThreads:
    """At most ``size`` threads named ``{prefix}_{n}`` running ``fn(arg)`` jobs in order of
    submission (a job starts as soon as a thread is free)."""

    def __init__(self, size: int, prefix: str) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.prefix = prefix
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._free: deque[None] = deque()  # a token per thread come to take a job
        self._closed = False
        _live.add(self)

    def submit(self, fn: Callable[[Any], None], arg: Any) -> None:
        """Run ``fn(arg)`` on a free thread (a new one if none is free and fewer than
        ``size`` run). Called from one thread at a time."""
        if self._closed:
            raise RuntimeError(f"handler threads {self.prefix!r} are shut down")
        self._jobs.put((fn, arg))
        try:
            self._free.pop()  # a thread come to take a job takes this one (or another)
        except IndexError:
            if len(self._threads) < self.size:
                self._start(fresh=True)

    def prestart(self) -> None:
        """Start every thread now, each waiting for a job (a node's start: the first burst
        of deliveries then hands its jobs to waiting threads instead of starting ``size``
        threads one after another - ``Thread.start`` waits for each - between a claim's
        answer and its handlers). Called before the first :meth:`submit`."""
        while len(self._threads) < self.size and not self._closed:
            self._start(fresh=False)

    def _start(self, fresh: bool) -> None:
        """One more thread (``fresh``: for the job just queued; else it waits for one)."""
        threads = self._threads
        thread = threading.Thread(
            target=self._work, args=(fresh,), name=f"{self.prefix}_{len(threads)}", daemon=False
        )
        threads.append(thread)
        thread.start()

    def shutdown(self) -> None:
        """Stop each thread once the jobs queued before are taken and its job ends; do not
        wait. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)

    def _work(self, fresh: bool = True) -> None:
        # A new thread comes for the job that started it (no token); after each job it
        # leaves a token and comes for the next: every token is a thread not running a job.
        # A thread started ahead (prestart, ``fresh`` False) has no job: it leaves one first.
        jobs, free, main = self._jobs, self._free, threading.main_thread()
        while True:
            if not fresh:
                free.append(None)
            fresh = False
            while True:
                try:
                    job = jobs.get(timeout=IDLE_CHECK)
                    break
                except queue.Empty:
                    if self._closed or not main.is_alive():
                        self._retract()
                        return  # the interpreter is exiting and nothing was handed out
            if job is None:
                return
            fn, arg = job
            try:
                fn(arg)
            except BaseException:  # the job's own (it reported what it could): go on
                log.debug("handler thread %s: job raised", self.prefix, exc_info=True)

    def _retract(self) -> None:
        with contextlib.suppress(IndexError):
            self._free.pop()
