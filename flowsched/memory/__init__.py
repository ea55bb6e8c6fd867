"""Internal: the in-memory scheduler adapter (timers in process, on a heap, fired by threads).

``store`` holds the data structure (heap + id map, fenced by record identity); ``scheduler``
the threads, the inline manual-clock delivery and the port methods.
"""

from flowsched.memory.scheduler import InMemoryScheduler

__all__ = ["InMemoryScheduler"]
