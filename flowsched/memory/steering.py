"""Internal: ``timers``, ``pause`` and ``resume`` of the in-memory schedulers (both faces).

The hooks of :class:`~flowsched.steering_face.TimerSteering` over the scheduler's store
(:mod:`flowsched.memory.timer_query`): the threaded scheduler calls them under its lock
(after applying the outcomes its workers queued), the asyncio one on its loop. A resume
wakes the firing side, which may sleep past the resumed due time.
"""

from __future__ import annotations

import threading
from typing import Protocol

from flowsched.clock import Clock
from flowsched.memory import timer_query
from flowsched.memory.store import TimerHeap
from flowsched.steering import TimerPage
from flowsched.steering_face import AsyncTimerSteering, TimerSteering
from flowsched.steering_query import TimerFilters

__all__ = ["AsyncMemorySteering", "MemorySteering"]


class _MemoryThreaded(Protocol):
    _lock: threading.Lock
    _store: TimerHeap
    _clock: Clock

    def _settle(self) -> None: ...

    def _wake_timer(self) -> None: ...


class _MemoryOnLoop(Protocol):
    _store: TimerHeap
    _clock: Clock

    @property
    def _alarm(self) -> _Ring: ...


class _Ring(Protocol):
    def ring(self) -> None: ...


class MemorySteering(TimerSteering):
    """The steering hooks of :class:`~flowsched.InMemoryScheduler`."""

    def _timer_page(self: _MemoryThreaded, filters: TimerFilters) -> TimerPage:
        with self._lock:
            self._settle()
            return timer_query.timer_page(self._store, filters)

    def _pause(self: _MemoryThreaded, item_id: str) -> bool:
        with self._lock:
            self._settle()
            return timer_query.pause(self._store, item_id)

    def _resume(self: _MemoryThreaded, item_id: str) -> bool:
        with self._lock:
            self._settle()
            resumed = timer_query.resume(self._store, item_id, self._clock.now())
            if resumed is not None:
                self._wake_timer()
        return resumed is not None


class AsyncMemorySteering(AsyncTimerSteering):
    """The steering hooks of :class:`~flowsched.AsyncInMemoryScheduler`."""

    async def _timer_page(self: _MemoryOnLoop, filters: TimerFilters) -> TimerPage:
        return timer_query.timer_page(self._store, filters)

    async def _pause(self: _MemoryOnLoop, item_id: str) -> bool:
        return timer_query.pause(self._store, item_id)

    async def _resume(self: _MemoryOnLoop, item_id: str) -> bool:
        resumed = timer_query.resume(self._store, item_id, self._clock.now())
        if resumed is not None:
            self._alarm.ring()
        return resumed is not None
