"""Internal: the in-memory scheduler adapter - the node core over the reference store.

* ``scheduler`` - ``InMemoryScheduler``: :class:`~flowsched.node.scheduler.NodeScheduler`
  (the node core and its thread driver) over :class:`~flowsched.store.MemoryTimerStore`,
  plus what is in-process only: a manual clock drives it from construction, claims hold as
  long as their handlers run, items of a route nobody serves are set aside once.
* ``async_scheduler`` - ``AsyncInMemoryScheduler``, the same over the asyncio driver.
* ``from_config`` - the settings of ``ipf-scheduler.flowsched`` that apply in process.
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
