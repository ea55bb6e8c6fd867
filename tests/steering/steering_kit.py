"""Helpers of the steering tests: one synchronous handle on any of the four schedulers.

:class:`Face` calls a scheduler's methods and, for an asyncio scheduler, runs the coroutine
on a loop of its own; ``advance`` steps the manual clock (``advance_async`` on that loop for
the async ones). So one test body runs over ``InMemoryScheduler``,
``AsyncInMemoryScheduler``, ``MongoScheduler`` and ``AsyncMongoScheduler`` alike.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from flowsched import (
    AsyncInMemoryScheduler,
    AsyncMongoScheduler,
    InMemoryScheduler,
    ManualClock,
    MongoScheduler,
    RedeliveryPolicy,
    ScheduleItem,
    ScheduleKind,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
KINDS = ("memory", "async-memory", "mongo", "async-mongo")
MONGO_KINDS = ("mongo", "async-mongo")


def mongomock_collection() -> Any:
    import mongomock

    return mongomock.MongoClient(tz_aware=True)["flowsched"][f"timers_{uuid.uuid4().hex[:8]}"]


class Face:
    """A scheduler of one of :data:`KINDS`, started on ``clock``, with a plain-call surface."""

    def __init__(
        self,
        kind: str,
        clock: ManualClock,
        collection: Any = None,
        node_id: str = "node-a",
        max_attempts: int | None = None,
    ) -> None:
        self.kind = kind
        self.clock = clock
        self.fired: list[tuple[str, datetime]] = []
        self.closed = False
        self.loop = asyncio.new_event_loop() if kind.startswith("async") else None
        policy = RedeliveryPolicy(initial=timedelta(seconds=3), max_attempts=max_attempts)
        if kind == "memory":
            self.scheduler: Any = InMemoryScheduler(clock=clock, redelivery=policy)
        elif kind == "async-memory":
            self.scheduler = AsyncInMemoryScheduler(clock=clock, redelivery=policy)
        elif kind == "mongo":
            self.scheduler = MongoScheduler(
                collection, node_id=node_id, clock=clock, redelivery=policy
            )
        else:
            self.scheduler = AsyncMongoScheduler(
                collection, node_id=node_id, clock=clock, redelivery=policy
            )
        self.call("start")

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.scheduler, name)(*args, **kwargs)
        if self.loop is not None and inspect.isawaitable(result):
            return self.loop.run_until_complete(result)
        return result

    def schedule(self, item_id: str, due_in: timedelta, **fields: Any) -> ScheduleItem:
        kind = fields.pop("kind", ScheduleKind.TIMER)
        item = ScheduleItem(item_id, kind, self.clock.now() + due_in, **fields)
        stored: ScheduleItem = self.call("schedule", item)
        return stored

    def advance(self, delta: timedelta) -> None:
        if self.loop is not None:
            self.loop.run_until_complete(self.clock.advance_async(delta))
        else:
            self.clock.advance(delta)

    def all(self, **filters: Any) -> list[Any]:
        """Every ``TimerInfo`` ``iter_timers(**filters)`` yields."""
        found = self.scheduler.iter_timers(**filters)
        if self.loop is None:
            return list(found)

        async def collect() -> list[Any]:
            return [info async for info in found]

        return self.loop.run_until_complete(collect())

    def ids(self, **filters: Any) -> list[str]:
        return [info.id for info in self.all(**filters)]

    def info(self, item_id: str) -> Any:
        """The ``TimerInfo`` of ``item_id`` (``None`` if ``timers()`` does not list it)."""
        for info in self.call("timers", id_prefix=item_id).items:
            if info.id == item_id:
                return info
        return None

    def on_timer(self, react: Callable[[Face, ScheduleItem, int], None] | None = None) -> None:
        """Record every TIMER delivery (id, clock time); ``react`` runs inside the handler
        (on the async faces inside an ``async def`` handler, its calls awaited)."""
        if self.loop is None:

            def handler(item: ScheduleItem, attempt: int) -> None:
                self.fired.append((item.id, self.clock.now()))
                if react is not None:
                    react(self, item, attempt)

            self.scheduler.subscribe(ScheduleKind.TIMER, handler)
            return

        async def async_handler(item: ScheduleItem, attempt: int) -> None:
            self.fired.append((item.id, self.clock.now()))
            if react is not None:
                try:
                    react(_Inside(self), item, attempt)
                finally:
                    await _Inside.drain()

        self.scheduler.subscribe(ScheduleKind.TIMER, async_handler)

    def fired_ids(self) -> list[str]:
        return [item_id for item_id, _ in self.fired]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.loop is not None:
            self.loop.run_until_complete(self.scheduler.aclose())
            self.loop.close()
        else:
            self.scheduler.close()


class _Inside:
    """A face for code running inside an async handler: calls are queued coroutines that the
    handler awaits after ``react`` returns (``react`` stays a plain function)."""

    pending: ClassVar[list[Any]] = []

    def __init__(self, face: Face) -> None:
        self.scheduler = face.scheduler

    def call(self, name: str, *args: Any, **kwargs: Any) -> None:
        _Inside.pending.append(getattr(self.scheduler, name)(*args, **kwargs))

    @staticmethod
    async def drain() -> None:
        pending, _Inside.pending = _Inside.pending, []
        for coroutine in pending:
            await coroutine
