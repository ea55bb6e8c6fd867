"""Internal: the handler threads of :mod:`flowsched.drivers.threads` — one shared queue and
at most ``size`` threads taking from it.

A hand-off is one ``SimpleQueue.put`` (no future, no condition, no semaphore per delivery,
as ``concurrent.futures.ThreadPoolExecutor`` makes): at the rates a node fires, those were a
large part of a timer's CPU. What is guaranteed:

* **Every job gets a thread while fewer than ``size`` run.** The caller says how many jobs
  are handed out and not ended (``wanted``, the core's running handlers); the pool keeps at
  least that many threads, up to ``size``. Every thread not running a job is taking from the
  one queue, so a job never waits behind a slow one while a thread is free.
* **At most ``size`` threads**, started on demand, named ``{prefix}_{n}`` as the executor's.
* **Shutdown** (:meth:`shutdown`) lets each thread end its job and stop; it does not wait. A
  thread left idle after the interpreter began to exit (a scheduler never closed) stops
  within :data:`IDLE_CHECK` seconds; one running a job keeps the interpreter until the job
  ends, as the executor's threads did.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["HandlerThreads"]

IDLE_CHECK = 1.0  # seconds an idle thread waits before it looks whether to stop

log = logging.getLogger("flowsched.node")

Job = tuple[Callable[[Any], None], Any]


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
        self._closed = False

    def submit(self, fn: Callable[[Any], None], arg: Any, wanted: int) -> None:
        """Run ``fn(arg)`` on a free thread; ``wanted``: how many jobs are handed out and
        not ended, this one included (at most ``size``). Called from one thread at a time."""
        if self._closed:
            raise RuntimeError(f"handler threads {self.prefix!r} are shut down")
        self._jobs.put((fn, arg))
        threads = self._threads
        while len(threads) < min(wanted, self.size):
            thread = threading.Thread(
                target=self._work, name=f"{self.prefix}_{len(threads)}", daemon=False
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

    def _work(self) -> None:
        jobs, main = self._jobs, threading.main_thread()
        while True:
            try:
                job = jobs.get(timeout=IDLE_CHECK)
            except queue.Empty:
                if self._closed or not main.is_alive():
                    return  # the interpreter is exiting and nothing was handed out
                continue
            if job is None:
                return
            fn, arg = job
            try:
                fn(arg)
            except BaseException:  # the job's own (it reported what it could): go on
                log.debug("handler thread %s: job raised", self.prefix, exc_info=True)
