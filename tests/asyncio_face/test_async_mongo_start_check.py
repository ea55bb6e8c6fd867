"""``AsyncMongoScheduler``: an item due while the node's handler slot is busy is not a
started delivery (CONTRACT section 15). Node B (``concurrency=1``, its slot busy) has it due;
node A cancels or replaces it; B must never run the old form. (The core's own rule, a
queued claim checked before its start, is pinned in ``tests/node/test_core.py``.)"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from async_kit import mongomock_collection, until  # noqa: E402

from flowsched import AsyncMongoScheduler, MongoScheduler, ScheduleItem, ScheduleKind  # noqa: E402

pytestmark = pytest.mark.asyncio
TIMER = ScheduleKind.TIMER


@pytest.mark.parametrize("change", ["cancel", "replace"])
async def test_a_cancel_or_replace_on_another_node_wins_over_a_claim_waiting_for_a_slot(
    change: str,
) -> None:
    collection: Any = mongomock_collection()
    ran: list[tuple[str, Any]] = []
    running, release = asyncio.Event(), asyncio.Event()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, item.payload))
        if item.id == "busy":
            running.set()
            await release.wait()

    node = AsyncMongoScheduler(
        collection, node_id="b", concurrency=1, poll_interval=timedelta(milliseconds=50)
    )
    other = MongoScheduler(collection, node_id="a")
    node.subscribe(TIMER, handler)
    now = node.now()
    await node.schedule(ScheduleItem("busy", TIMER, now - timedelta(seconds=1)))
    await node.schedule(ScheduleItem("victim", TIMER, now, payload={"form": "old"}))
    async with node:
        await asyncio.wait_for(running.wait(), 10)  # the victim is due, the slot busy
        if change == "cancel":
            assert other.cancel("victim")
        else:
            later = node.now() + timedelta(milliseconds=200)
            other.schedule(ScheduleItem("victim", TIMER, later, payload={"form": "new"}))
        release.set()
        if change == "cancel":  # busy settled, the victim gone: nothing left to run
            assert await until(lambda: collection.count_documents({}) == 0)
        else:
            assert await until(lambda: ("victim", {"form": "new"}) in ran)
    other.close()
    assert ("victim", {"form": "old"}) not in ran
