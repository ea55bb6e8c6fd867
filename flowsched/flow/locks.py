"""Internal: one lock per flow instance, created on demand, dropped when nobody holds or waits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["InstanceLocks"]


class InstanceLocks:
    """``with locks.hold(flow_id):`` serialises work on one instance, not on all of them.

    Not re-entrant: the domain never calls out (to actions or listeners) while holding one.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """How many instances are held or waited on right now (0 when idle)."""
        with self._guard:
            return len(self._locks)
