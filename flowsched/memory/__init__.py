"""Internal: the in-memory scheduler adapter (timers in process, on a heap, fired by threads).

* ``scheduler`` - ``InMemoryScheduler``, the whole adapter in one class: the port's calls,
  delivery on the calling thread (``run_due``, a manual clock's ``advance``) and by worker
  threads, applying outcomes under the lock, ``start`` and ``close``.
* ``store`` - ``MemoryTimerStore``, the data structure: a heap plus an id map, fenced by the
  identity of the stored form; parked items and dead letters.
* ``pool`` - ``WorkerPool``, the handler threads (a bounded leader/followers pool).
"""

from flowsched.memory.scheduler import InMemoryScheduler

__all__ = ["InMemoryScheduler"]
