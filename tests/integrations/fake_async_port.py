"""A small stand-in for the async schedulers of CONTRACT section 11 (``AsyncInMemoryScheduler``),
which another branch is building: the calls ``AsyncDurableMachine`` and the async
``StatechartTimers`` use, with the documented meaning, on a ManualClock.

STAND-IN ONLY: the tests that use it prove the integration speaks the documented async API;
the same tests are to run on the real ``AsyncInMemoryScheduler`` once it lands.

``await advance(delta)`` plays the role of ``manual_clock.advance_async``: every item due on
the way is delivered at its due time, in due order, follow-ups included. A handler that
raises is redelivered 3 s later; one that raises ``Undeliverable`` is a dead letter.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from flowsched import (
    DeadLetter,
    ManualClock,
    ScheduleItem,
    ScheduleKind,
    Undeliverable,
)


class FakeAsyncScheduler:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.items: dict[str, tuple[ScheduleItem, int]] = {}
        self.handlers: dict[str, Callable[..., Any]] = {}
        self.dead: list[DeadLetter] = []
        self.deliveries = 0
        self._generation = 0

    def now(self) -> datetime:
        return self.clock.now()

    def register(self, name: str, handler: Callable[..., Any], *, on_failed: Any = None) -> None:
        if name in self.handlers:
            raise ValueError(f"handler {name!r} is already registered on this scheduler")
        self.handlers[name] = handler

    async def schedule(self, item: ScheduleItem) -> ScheduleItem:
        self._generation += 1
        stored = item.with_generation(self._generation)
        self.items[item.id] = (stored, 0)
        return stored

    async def create_single_timer(
        self,
        timer_id: str,
        delay: timedelta | datetime,
        handler: str,
        arg: Mapping[str, Any] | None = None,
    ) -> ScheduleItem:
        due = self.now() + delay if isinstance(delay, timedelta) else delay
        item = ScheduleItem(timer_id, ScheduleKind.TIMER, due, payload=arg, handler=handler)
        return await self.schedule(item)

    async def cancel(self, item_id: str) -> bool:
        return self.items.pop(item_id, None) is not None

    async def exists(self, item_id: str) -> bool:
        return item_id in self.items

    async def get(self, item_id: str) -> ScheduleItem | None:
        found = self.items.get(item_id)
        return None if found is None else found[0]

    async def advance(self, delta: timedelta) -> None:
        target = self.now() + delta
        while True:
            due = [
                (item.due, item.generation, item.id)
                for item, _ in self.items.values()
                if item.due <= target and item.handler in self.handlers
            ]
            if not due:
                break
            when, _, item_id = min(due)
            if when > self.now():
                self.clock.set(when)
            await self._deliver(*self.items[item_id])
        if target > self.now():
            self.clock.set(target)

    async def _deliver(self, item: ScheduleItem, attempt: int) -> None:
        assert item.handler is not None
        handler = self.handlers[item.handler]
        self.deliveries += 1
        try:
            result = handler(item, attempt)
            if inspect.isawaitable(result):
                await result
        except Undeliverable as exc:
            self._settle(item)
            self.dead.append(DeadLetter(item, attempt + 1, f"Undeliverable: {exc}", self.now()))
            return
        except Exception:
            current = self.items.get(item.id)
            if current is not None and current[0].generation == item.generation:
                moved = item.moved(self.now() + timedelta(seconds=3))
                self.items[item.id] = (moved, attempt + 1)
            return
        self._settle(item)

    def _settle(self, item: ScheduleItem) -> None:
        current = self.items.get(item.id)
        if current is not None and current[0].generation == item.generation:
            del self.items[item.id]

    async def dead_letters(self) -> list[DeadLetter]:
        return list(self.dead)
