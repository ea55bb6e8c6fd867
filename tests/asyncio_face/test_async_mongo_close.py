"""``AsyncMongoScheduler.aclose`` called from a handler, and twice at once (mongomock, real
time): the handler's own outcome is written, and the second call waits for the first
(CONTRACT section 11: on exit, handlers in flight finish and their outcomes are written)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
import pytest

from flowsched import AsyncMongoScheduler, ScheduleItem, ScheduleKind

pytestmark = pytest.mark.asyncio
FAST = timedelta(milliseconds=50)


def collection() -> Any:
    return mongomock.MongoClient(tz_aware=True)["db"]["timers"]


async def until(check: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not reached in time")


async def test_a_handler_that_closes_its_scheduler_is_completed() -> None:
    items = collection()
    node = AsyncMongoScheduler(items, node_id="n1", poll_interval=FAST)
    ran: list[int] = []

    async def shutdown(item: ScheduleItem, attempt: int) -> None:
        await node.aclose()  # returns normally afterwards: the timer is done
        ran.append(attempt)

    await node.start()
    node.register("shutdown", shutdown)
    await node.schedule(
        ScheduleItem("stop", ScheduleKind.TIMER, datetime.now(UTC), handler="shutdown")
    )
    await until(lambda: ran and items.find_one({"_id": "stop"}) is None)
    assert ran == [0]


async def test_a_second_aclose_waits_for_the_handlers_in_flight() -> None:
    items = collection()
    node = AsyncMongoScheduler(items, node_id="n1", poll_interval=FAST)
    started, done = asyncio.Event(), []

    async def slow(item: ScheduleItem, attempt: int) -> None:
        started.set()
        await asyncio.sleep(0.3)
        done.append(item.id)

    await node.start()
    node.register("slow", slow)
    await node.schedule(ScheduleItem("x", ScheduleKind.TIMER, datetime.now(UTC), handler="slow"))
    await asyncio.wait_for(started.wait(), 5)
    first = asyncio.create_task(node.aclose())
    await asyncio.sleep(0)
    await node.aclose()
    assert done == ["x"] and items.find_one({"_id": "x"}) is None
    await first
