"""``AsyncMongoScheduler``, start on claim (CONTRACT section 15): a claim records its start
as it is taken (the node claims for free handler slots only), shown by ``history`` as an
open attempt from that start, which precedes a cancel that returns after the claim; an item
waiting for a busy slot is not claimed, so nothing of it is recorded or started. In virtual
time (``run_due``) each delivery's attempt starts at the recorded claim, too."""

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
        [open_attempt] = await node.history("job")
        recorded = open_attempt.started  # recorded by the claim, by the database's clock
        assert (open_attempt.node, open_attempt.ended) == ("b", None)
        assert _claim(collection, "job")  # the claim that recorded it
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
    # The one slot is busy: the other item due may be claimed for the queue (one slot for a
    # batch of 100: the node queues, ``starts_on_claim``), but no start is recorded; it is
    # checked (a confirm), started and run once the slot is free.
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
        assert [a.ended for a in await node.history("busy")] == [None]  # started
        await node.run_due()  # a turn of its own: the slot is still busy
        assert "at" not in (_claim(collection, "queued") or {})  # no start recorded
        assert await node.history("queued") == []  # nothing recorded, nothing started
        release.set()
        assert await until(lambda: ran == ["busy", "queued"])
        assert await until(lambda: collection.count_documents({}) == 0)
    [attempt] = await node.history("queued")
    assert (attempt.node, attempt.outcome) == ("b", "succeeded")


async def test_run_due_records_no_start_on_the_claim() -> None:
    # Virtual time delivers one claim at a time, in due order: each attempt starts at its
    # recorded claim, at the clock's time.
    collection: Any = mongomock_collection()
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    node = AsyncMongoScheduler(collection, node_id="b", clock=clock)
    seen: dict[str, Any] = {}

    async def handler(item: ScheduleItem, attempt: int) -> None:
        [running] = await node.history(item.id)
        seen[item.id] = (running.started, running.ended)

    node.subscribe(TIMER, handler)
    for n in range(3):
        await node.schedule(ScheduleItem(f"t-{n}", TIMER, clock.now()))
    assert await node.run_due() == 3
    assert seen == {f"t-{n}": (clock.now(), None) for n in range(3)}
    assert [a.started for a in await node.history("t-0")] == [clock.now()]
    await node.aclose()
