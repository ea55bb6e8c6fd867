"""Internal: the in-memory scheduler adapter (timers in process, on a heap, fired by threads).

``scheduler`` holds ``InMemoryScheduler`` and the port's calls; ``store`` the data structure
(heap + id map, fenced by record identity); ``outcomes`` running a claim and applying its
outcome; ``inline`` delivery on the calling thread (manual clock, ``run_due``); ``realtime``
and ``pool`` the worker threads; ``async_scheduler`` the asyncio face
(``AsyncInMemoryScheduler``) over the same store.
"""

from flowsched.memory.async_scheduler import AsyncInMemoryScheduler
from flowsched.memory.scheduler import InMemoryScheduler

__all__ = ["AsyncInMemoryScheduler", "InMemoryScheduler"]
