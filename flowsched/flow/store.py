"""Internal: where flow instances live between events — the store port and an in-process store.

Every store versions instances optimistically: :meth:`FlowStore.update` succeeds only if the
stored version is still the one the caller loaded, so two timers firing at once for one
instance (on two threads or two hosts) can never silently overwrite each other. The domain
reloads and retries on :class:`ConcurrentUpdateError`.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from flowsched.callables import is_async_callable
from flowsched.errors import ConcurrentUpdateError, FlowAlreadyExistsError
from flowsched.flow.instance import FlowInstance

__all__ = [
    "AsyncFlowStore",
    "ConcurrentUpdateError",
    "FlowAlreadyExistsError",
    "FlowStore",
    "InMemoryFlowStore",
]


@runtime_checkable
class FlowStore(Protocol):
    """What the flow domain needs to keep instances. Implementations must be thread-safe."""

    def load(self, flow_id: str) -> FlowInstance | None:
        """The stored instance (with its current ``version``), or ``None``."""
        ...

    def insert(self, instance: FlowInstance) -> FlowInstance:
        """Store a new instance at version 1 and return it;
        :class:`FlowAlreadyExistsError` if the id is taken."""
        ...

    def update(self, instance: FlowInstance) -> FlowInstance:
        """Replace the stored instance whose version is ``instance.version``; return it at
        the next version. :class:`ConcurrentUpdateError` if the stored version differs."""
        ...


@runtime_checkable
class AsyncFlowStore(Protocol):
    """A :class:`FlowStore` whose calls are coroutines (an asyncio driver's store, such as the
    FastAPI example's ``AsyncMongoFlowStore``), with the same rules. Only an
    :class:`~flowsched.flow.async_domain.AsyncFlowDomain` (``build_async()``) can use one:
    ``build()`` refuses it with a ``TypeError``."""

    async def load(self, flow_id: str) -> FlowInstance | None:
        """As :meth:`FlowStore.load`."""
        ...

    async def insert(self, instance: FlowInstance) -> FlowInstance:
        """As :meth:`FlowStore.insert`."""
        ...

    async def update(self, instance: FlowInstance) -> FlowInstance:
        """As :meth:`FlowStore.update`."""
        ...


def async_store_calls(store: object) -> list[str]:
    """The ``load``/``insert``/``update`` of ``store`` that are coroutine functions."""
    return [
        name
        for name in ("load", "insert", "update")
        if is_async_callable(getattr(store, name, None))
    ]


class InMemoryFlowStore:
    """A :class:`FlowStore` in a dict, for tests and single-process use.

    Instances are kept as the immutable :class:`FlowInstance` objects they are (documents
    only at a durable store's boundary): a load returns the very object stored, which
    nobody can change (its ``data`` is read-only at the top level; leave nested values
    alone, as with any stored value)."""

    def __init__(self) -> None:
        self._instances: dict[str, FlowInstance] = {}
        self._lock = threading.Lock()

    def load(self, flow_id: str) -> FlowInstance | None:
        return self._instances.get(flow_id)  # one dict read: atomic, no lock needed

    def insert(self, instance: FlowInstance) -> FlowInstance:
        stored = instance.evolve(version=1)
        with self._lock:
            if instance.flow_id in self._instances:
                raise FlowAlreadyExistsError(f"flow instance {instance.flow_id!r} already exists")
            self._instances[instance.flow_id] = stored
        return stored

    def update(self, instance: FlowInstance) -> FlowInstance:
        stored = instance.evolve(version=instance.version + 1)
        with self._lock:
            current = self._instances.get(instance.flow_id)
            if current is None or current.version != instance.version:
                found = None if current is None else current.version
                raise ConcurrentUpdateError(
                    f"flow instance {instance.flow_id!r}: expected version {instance.version},"
                    f" found {found}"
                )
            self._instances[instance.flow_id] = stored
        return stored

    def __len__(self) -> int:
        return len(self._instances)
