"""Internal: ``timers``, ``pause`` and ``resume`` of the MongoDB schedulers (both faces).

The hooks of :class:`~flowsched.steering_face.TimerSteering` run the procedures of
:mod:`flowsched.mongo.timer_query` the way every other call of the scheduler runs (its
``_call``: indexes first, transient errors retried within ``op_timeout``). A pause also
counts as a local write by id (:mod:`flowsched.mongo.local_writes`), so a claim this node
already holds on the item is released rather than started; a resume wakes the sweeper,
which may sleep past the resumed due time. Resume judges "now" by the database's clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from flowsched.mongo.arguments import storable_id
from flowsched.mongo.commands import Steps
from flowsched.mongo.local_writes import LocalWrites
from flowsched.mongo.store import TimerStore
from flowsched.mongo.timer_query import pause_steps, resume_steps, timers_steps
from flowsched.steering import TimerPage
from flowsched.steering_face import AsyncTimerSteering, TimerSteering
from flowsched.steering_query import TimerFilters

__all__ = ["AsyncMongoSteering", "MongoSteering"]

T = TypeVar("T")


class _MongoThreaded(Protocol):
    _store: TimerStore
    _local_writes: LocalWrites
    _sweeper: Any

    def now(self) -> datetime: ...

    def _call(self, what: str, operation: Callable[[], T]) -> T: ...


class _MongoOnLoop(Protocol):
    _store: TimerStore
    _local_writes: LocalWrites
    _sweeper: Any

    def _now_for_due(self) -> Awaitable[datetime]: ...

    def _call(
        self, what: str, steps: Callable[[], Steps[T]], indexes: bool = True
    ) -> Awaitable[T]: ...


class MongoSteering(TimerSteering):
    """The steering hooks of :class:`~flowsched.MongoScheduler`."""

    def _timer_page(self: _MongoThreaded, filters: TimerFilters) -> TimerPage:
        return self._call("timers", lambda: self._store.run(timers_steps(filters)))

    def _pause(self: _MongoThreaded, item_id: str) -> bool:
        if not storable_id(item_id):
            return False  # an id no item can have: no round trip (as exists)
        try:
            run = lambda: self._store.run(pause_steps(self._store, item_id))  # noqa: E731
            return self._call(f"pause({item_id!r})", run)
        finally:
            self._local_writes.touch(item_id)  # even on error: the write may have applied

    def _resume(self: _MongoThreaded, item_id: str) -> bool:
        if not storable_id(item_id):
            return False
        now = self.now()
        run = lambda: self._store.run(resume_steps(self._store, item_id, now))  # noqa: E731
        resumed = self._call(f"resume({item_id!r})", run)
        if resumed and self._sweeper is not None:
            self._sweeper.poke(now)
        return resumed


class AsyncMongoSteering(AsyncTimerSteering):
    """The steering hooks of :class:`~flowsched.AsyncMongoScheduler`."""

    async def _timer_page(self: _MongoOnLoop, filters: TimerFilters) -> TimerPage:
        return await self._call("timers", lambda: timers_steps(filters))

    async def _pause(self: _MongoOnLoop, item_id: str) -> bool:
        if not storable_id(item_id):
            return False
        try:
            return await self._call(
                f"pause({item_id!r})", lambda: pause_steps(self._store, item_id)
            )
        finally:
            self._local_writes.touch(item_id)

    async def _resume(self: _MongoOnLoop, item_id: str) -> bool:
        if not storable_id(item_id):
            return False
        now = await self._now_for_due()
        resumed = await self._call(
            f"resume({item_id!r})", lambda: resume_steps(self._store, item_id, now)
        )
        if resumed:
            self._sweeper.alarm.ring()
        return resumed
