"""``AsyncMongoScheduler``: a claim waiting for a handler slot is not a started delivery
(CONTRACT section 15). Node B (``concurrency=1``, its slot busy) has claimed an item in a
batch; node A cancels or replaces it; B must never run the old form. ``START_FRESH`` is 0
here, so every start is checked after it got its slot."""

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


@pytest.fixture(autouse=True)
def check_every_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("flowsched.mongo.start_check.START_FRESH", 0.0)

    def no_renewal(*args: Any) -> Any:  # a renewal would also find the claim gone: not yet
        return None
        yield

    monkeypatch.setattr("flowsched.mongo.async_sweeper.renew_held_steps", no_renewal)


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
        await asyncio.wait_for(running.wait(), 10)
        claimed = lambda: (collection.find_one({"_id": "victim"}) or {}).get("claim")  # noqa: E731
        assert await until(claimed)  # in the batch, waiting for the busy slot
        if change == "cancel":
            assert other.cancel("victim")
        else:
            later = node.now() + timedelta(milliseconds=200)
            other.schedule(ScheduleItem("victim", TIMER, later, payload={"form": "new"}))
        release.set()
        if change == "cancel":
            assert await until(lambda: not node._sweeper._held)
        else:
            assert await until(lambda: ("victim", {"form": "new"}) in ran)
    other.close()
    assert ("victim", {"form": "old"}) not in ran
