"""``AsyncMongoScheduler``, start on claim (CONTRACT section 15): a claim with a free handler
slot records its start (``claim.started``), shown by ``history`` as an open attempt from
that start, which precedes a cancel that returns after the claim; a claim waiting for a
slot records nothing and is checked before its handler (flowsched.mongo.start_check)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from async_kit import mongomock_collection, until  # noqa: E402

from flowsched import (  # noqa: E402
    AsyncMongoScheduler,
    ManualClock,
    MongoScheduler,
    ScheduleItem,
    ScheduleKind,
)
from flowsched.mongo.documents import bson_utc  # noqa: E402

pytestmark = pytest.mark.asyncio
TIMER = ScheduleKind.TIMER


def _claim(collection: Any, item_id: str) -> dict[str, Any]:
    found = collection.find_one({"_id": item_id})
    return (found or {}).get("claim") or {}


@pytest.mark.parametrize("by", ["another node", "the node itself"])
async def test_a_recorded_start_is_an_open_attempt_that_precedes_a_cancel(by: str) -> None:
    collection: Any = mongomock_collection()
    running, release = asyncio.Event(), asyncio.Event()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        running.set()
        await release.wait()

    node = AsyncMongoScheduler(collection, node_id="b", poll_interval=timedelta(milliseconds=50))
    other = MongoScheduler(collection, node_id="a")
    node.subscribe(TIMER, handler)
    await node.schedule(ScheduleItem("job", TIMER, node.now()))
    async with node:
        await asyncio.wait_for(running.wait(), 10)
        recorded = bson_utc(_claim(collection, "job")["started"])
        [open_attempt] = await node.history("job")
        assert (open_attempt.started, open_attempt.ended) == (recorded, None)
        assert other.cancel("job") if by == "another node" else await node.cancel("job")
        assert recorded <= datetime.now(UTC)  # mongomock's clock is this host's
        [kept] = await node.history("job")  # kept by the cancel that removed the claim
        assert (kept.started, kept.ended) == (recorded, None)
        release.set()
        assert await until(lambda: [a.ended is not None for a in other.history("job")] == [True])
        [attempt] = other.history("job")
        assert attempt.started == recorded  # the recorded start, not the handler's call
    other.close()


async def test_a_claim_waiting_for_a_slot_records_no_start_and_is_checked() -> None:
    collection: Any = mongomock_collection()
    ran: list[str] = []
    running, release = asyncio.Event(), asyncio.Event()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append(item.id)
        if item.id == "busy":
            running.set()
            await release.wait()

    node = AsyncMongoScheduler(
        collection, node_id="b", concurrency=1, poll_interval=timedelta(milliseconds=50)
    )
    node.subscribe(TIMER, handler)
    now = node.now()
    await node.schedule(ScheduleItem("busy", TIMER, now - timedelta(seconds=1)))
    await node.schedule(ScheduleItem("queued", TIMER, now))
    async with node:
        await asyncio.wait_for(running.wait(), 10)
        assert await until(lambda: bool(_claim(collection, "queued")))
        assert "started" in _claim(collection, "busy")
        assert "started" not in _claim(collection, "queued")
        checks = node._sweeper._checks
        assert checks.checks == 0
        release.set()
        assert await until(lambda: ran == ["busy", "queued"])
        assert checks.checks == 1  # the claim that waited for the slot was checked


async def test_run_due_records_no_start_on_the_claim() -> None:
    # Virtual time awaits the batch's deliveries one after another: none starts on the
    # claim, each is checked first.
    collection: Any = mongomock_collection()
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    node = AsyncMongoScheduler(collection, node_id="b", clock=clock)
    seen: dict[str, Any] = {}

    async def handler(item: ScheduleItem, attempt: int) -> None:
        seen[item.id] = _claim(collection, item.id).get("started")

    node.subscribe(TIMER, handler)
    for n in range(3):
        await node.schedule(ScheduleItem(f"t-{n}", TIMER, clock.now()))
    assert await node.run_due() == 3
    assert seen == {"t-0": None, "t-1": None, "t-2": None}
    assert node._sweeper._checks.checks >= 1  # the claims were checked
    assert [a.started for a in await node.history("t-0")] == [clock.now()]
    await node.aclose()
