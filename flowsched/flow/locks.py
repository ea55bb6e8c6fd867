"""Internal: one lock per flow instance, created on demand, dropped when nobody holds or waits."""

from __future__ import annotations

import threading

__all__ = ["InstanceLocks"]


class InstanceLocks:
    """``with locks.hold(flow_id):`` serialises work on one instance, not on all of them.

    Not re-entrant: the domain never calls out (to actions or listeners) while holding one.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    def hold(self, key: str) -> _Held:
        """A context manager holding ``key``'s lock (a plain object: cheaper than a
        generator-based one on the flow domain's hot path)."""
        return _Held(self, key)

    def _acquire(self, key: str) -> threading.Lock:
        with self._guard:
            lock, users = self._locks.get(key) or (threading.Lock(), 0)
            self._locks[key] = (lock, users + 1)
        lock.acquire()
        return lock

    def _release(self, key: str, lock: threading.Lock) -> None:
        lock.release()
        with self._guard:
            users = self._locks[key][1]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """How many instances are held or waited on right now (0 when idle)."""
        with self._guard:
            return len(self._locks)


class _Held:
    __slots__ = ("_key", "_lock", "_locks")

    def __init__(self, locks: InstanceLocks, key: str) -> None:
        self._locks = locks
        self._key = key

    def __enter__(self) -> None:
        self._lock = self._locks._acquire(self._key)

    def __exit__(self, *exc: object) -> None:
        self._locks._release(self._key, self._lock)
