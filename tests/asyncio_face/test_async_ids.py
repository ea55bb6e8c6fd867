"""The async adapters answer an id of another type as the sync ones do: no item has it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from flowsched import AsyncInMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind

mongomock = pytest.importorskip("mongomock")
pytestmark = pytest.mark.asyncio


def _memory(clock: ManualClock) -> Any:
    return AsyncInMemoryScheduler(clock=clock)


def _mongomock(clock: ManualClock) -> Any:
    from flowsched import AsyncMongoScheduler

    collection = mongomock.MongoClient(tz_aware=True)["flowsched"][uuid.uuid4().hex]
    return AsyncMongoScheduler(collection, node_id="test", clock=clock)


@pytest.mark.parametrize("make", [_memory, _mongomock], ids=["memory", "mongomock"])
@pytest.mark.parametrize("other", [{"a": 1}, ["timer"], 7, None, b"timer"], ids=repr)
async def test_an_id_of_another_type_is_simply_not_there(make: Any, other: object) -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    scheduler = make(clock)
    await scheduler.schedule(ScheduleItem("timer", ScheduleKind.TIMER, clock.now(), flow_id="t"))
    assert await scheduler.exists(other) is False
    assert await scheduler.get(other) is None
    assert await scheduler.cancel(other) is False
    assert await scheduler.cancel_flow(other) == 0
    assert await scheduler.exists("timer")
