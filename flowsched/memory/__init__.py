"""Internal: the in-memory scheduler adapter (timers in process, on a heap, fired by threads).

* ``scheduler`` - ``InMemoryScheduler``, the whole adapter in one class: the port's calls,
  delivery on the calling thread (``run_due``, a manual clock's ``advance``) and by worker
  threads, applying outcomes under the lock, ``start`` and ``close``.
* ``store`` - ``TimerHeap``, the data structure: a heap plus an id map, fenced by the
  identity of the stored form; parked items and dead letters.
* ``pool`` - ``WorkerPool``, the handler threads (a bounded leader/followers pool).
* ``async_scheduler`` - ``AsyncInMemoryScheduler``, the asyncio face over the same store and
  delivery core.
"""

from typing import TYPE_CHECKING, Any

from flowsched.memory.scheduler import InMemoryScheduler

if TYPE_CHECKING:
    from flowsched.memory.async_scheduler import AsyncInMemoryScheduler


def __getattr__(name: str) -> Any:
    # The asyncio face loads asyncio (~30 ms): only when first asked for.
    if name == "AsyncInMemoryScheduler":
        from flowsched.memory.async_scheduler import AsyncInMemoryScheduler

        return AsyncInMemoryScheduler
    raise AttributeError(f"module 'flowsched.memory' has no attribute {name!r}")


__all__ = ["AsyncInMemoryScheduler", "InMemoryScheduler"]
