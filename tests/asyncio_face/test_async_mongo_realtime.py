"""``AsyncMongoScheduler`` in real time on the wire server: every ``async def`` delivery runs
once (none lost), plain handlers run off the loop, ``async with`` leaves no task behind, a
bounded shutdown leaves its running claims unsettled (delivered again by the next node),
a change stream wakes a node for an item another node scheduled, and an async and a sync node
on one collection are one cluster routed by handler name."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio

pytest.importorskip("pymongo")

from async_kit import flowsched_tasks, until
from pymongo import AsyncMongoClient

from flowsched import (
    AsyncMongoScheduler,
    MongoScheduler,
    ScheduleItem,
    ScheduleKind,
    SystemClock,
)

TIMER = ScheduleKind.TIMER
pytestmark = [pytest.mark.asyncio, pytest.mark.wire]
FAST = timedelta(milliseconds=100)
WIRE = 20.0  # seconds a wait on the wire server may take


@pytest.fixture
def names(mongo_db: Any) -> Iterator[tuple[str, str]]:
    """(database, collection) on the wire server; the database is dropped afterwards."""
    yield mongo_db.name, f"timers_{uuid.uuid4().hex[:8]}"


@pytest_asyncio.fixture
async def collection(mongo_uri: str, names: tuple[str, str]) -> AsyncIterator[Any]:
    client: Any = AsyncMongoClient(mongo_uri, tz_aware=True)
    yield client[names[0]][names[1]]
    await client.close()


async def test_every_async_delivery_runs_once_and_no_task_is_left(collection: Any) -> None:
    clock = SystemClock()
    ran: Counter[str] = Counter()
    before = set(asyncio.all_tasks())
    async with AsyncMongoScheduler(collection, node_id="a", poll_interval=FAST) as scheduler:

        async def handler(item: ScheduleItem, attempt: int) -> None:
            await asyncio.sleep(0)
            ran[item.id] += 1

        scheduler.subscribe(TIMER, handler)
        for n in range(150):
            await scheduler.schedule(ScheduleItem(f"t-{n}", TIMER, clock.now()))
        assert await until(lambda: len(ran) == 150, WIRE)
        await asyncio.sleep(0.3)  # time for a second delivery to show, were there one
    assert set(ran.values()) == {1}
    assert await collection.count_documents({}) == 0
    left = set(asyncio.all_tasks()) - before  # the client's own monitor tasks aside
    assert flowsched_tasks(left) == []


async def test_a_shutdown_while_a_batch_starts_loses_nothing_and_runs_nothing_twice(
    collection: Any,
) -> None:
    # The node is closed as soon as its first handler has run, while it is still claiming
    # and starting the rest: what it started is run and settled, what it had not claimed
    # stays unclaimed and uncounted, and the next node runs each of those once.
    count = 40
    first = AsyncMongoScheduler(collection, node_id="first", poll_interval=FAST, concurrency=5)
    ran: Counter[str] = Counter()
    one_ran = asyncio.Event()

    async def note(item: ScheduleItem, attempt: int) -> None:
        ran[item.id] += 1
        one_ran.set()

    first.subscribe(TIMER, note)
    now = first.now()
    for n in range(count):
        await first.schedule(ScheduleItem(f"t-{n:02d}", TIMER, now))
    await first.start()
    await asyncio.wait_for(one_ran.wait(), WIRE)
    await first.aclose()
    assert 1 <= len(ran) < count
    left = await collection.find({}).to_list(None)
    assert sorted(doc["_id"] for doc in left) == sorted(set(ids(count)) - set(ran))
    assert all(not doc.get("claim") and doc["attempts"] == 0 for doc in left)

    async with AsyncMongoScheduler(collection, node_id="second", poll_interval=FAST) as second:

        async def record(item: ScheduleItem, attempt: int) -> None:
            ran[item.id] += 1

        second.subscribe(TIMER, record)
        assert await until(lambda: len(ran) == count, WIRE)
    assert set(ran.values()) == {1}


def ids(count: int) -> list[str]:
    return [f"t-{n:02d}" for n in range(count)]


async def test_plain_handlers_run_off_the_loop(collection: Any) -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []
    async with AsyncMongoScheduler(collection, node_id="a", poll_interval=FAST) as scheduler:
        scheduler.subscribe(TIMER, lambda item, attempt: threads.append(threading.get_ident()))
        await scheduler.schedule(ScheduleItem("t", TIMER, scheduler.now()))
        assert await until(lambda: bool(threads), WIRE)
    assert threads[0] != loop_thread


async def test_a_handler_cancelled_by_shutdown_is_delivered_again(collection: Any) -> None:
    # Not settled: its claim lapses (CONTRACT section 15) and another node delivers it again
    # once the lease has run out, as the same attempt.
    started = asyncio.Event()
    lease = timedelta(seconds=2)
    first = AsyncMongoScheduler(collection, node_id="first", poll_interval=FAST, lease=lease)

    async def forever(item: ScheduleItem, attempt: int) -> None:
        started.set()
        await asyncio.sleep(3600)

    first.subscribe(TIMER, forever)
    await first.start()
    await first.schedule(ScheduleItem("t", TIMER, first.now()))
    await asyncio.wait_for(started.wait(), 20)
    await first.aclose(timeout=0.1)
    stored = await collection.find_one({"_id": "t"})
    assert stored is not None and stored["attempts"] == 0  # no failure counted

    seen: list[int] = []
    async with AsyncMongoScheduler(collection, node_id="second", poll_interval=FAST) as second:
        second.subscribe(TIMER, lambda item, attempt: seen.append(attempt))
        assert await until(lambda: seen == [0], WIRE)


async def test_a_change_stream_wakes_the_node_for_another_nodes_item(
    collection: Any, mongo_uri: str, names: tuple[str, str]
) -> None:
    fired = asyncio.Event()
    slow_poll = timedelta(seconds=30)
    async with AsyncMongoScheduler(collection, node_id="a", poll_interval=slow_poll) as node:
        node.subscribe(TIMER, lambda item, attempt: fired.set())
        await asyncio.sleep(2.0)  # the first poll has looked (and seen nothing); the stream opens
        other = MongoScheduler(pymongo_collection(mongo_uri, names), node_id="b")
        other.schedule(ScheduleItem("t", TIMER, other.now()))
        await asyncio.wait_for(fired.wait(), 10)  # long before the 30 s poll


def pymongo_collection(uri: str, names: tuple[str, str]) -> Any:
    import pymongo

    return pymongo.MongoClient(uri, tz_aware=True)[names[0]][names[1]]


async def test_an_async_and_a_sync_node_share_a_collection_routed_by_name(
    collection: Any, mongo_uri: str, names: tuple[str, str]
) -> None:
    by_async: list[str] = []
    by_sync: list[str] = []
    sync_node = MongoScheduler(
        pymongo_collection(mongo_uri, names), node_id="s", poll_interval=FAST
    )
    sync_node.register("pay", lambda item, attempt: by_sync.append(item.id))
    async with AsyncMongoScheduler(collection, node_id="a", poll_interval=FAST) as node:

        async def remind(item: ScheduleItem, attempt: int) -> None:
            by_async.append(item.id)

        node.register("remind", remind)
        with sync_node:
            for n in range(20):
                await node.create_single_timer(f"r-{n}", timedelta(0), "remind")
                sync_node.create_single_timer(f"p-{n}", timedelta(0), "pay")
            assert await until(lambda: len(by_async) == 20 and len(by_sync) == 20, WIRE)
    assert sorted(by_async) == sorted(f"r-{n}" for n in range(20))
    assert sorted(by_sync) == sorted(f"p-{n}" for n in range(20))


async def test_while_the_node_sweeps_its_stream_is_left_unread_then_opened_from_now(
    collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The async face's wake-up follows the same rule as the threaded one.
    from flowsched.mongo import async_wakeup
    from flowsched.mongo.async_wakeup import follow_changes

    monkeypatch.setattr(async_wakeup, "REOPEN_AFTER", 0.3)

    sweeping = False
    rings: list[float] = []
    watch = asyncio.create_task(
        follow_changes(
            collection,
            lambda: rings.append(time.monotonic()),
            lambda doc: True,
            0.2,
            paused=lambda: sweeping,
        )
    )
    try:
        assert await until(lambda: len(rings) == 1, WIRE)  # opened from now: one sweep at once
        sweeping = True
        await asyncio.sleep(0.2)
        for n in range(3):
            await collection.insert_one({"_id": f"during-{n}", "kind": "TIMER", "claim": None})
        await asyncio.sleep(0.4)
        assert len(rings) == 1  # unread while it sweeps
        sweeping = False
        assert await until(lambda: len(rings) == 2, WIRE)  # reopened from now: one sweep
        await asyncio.sleep(0.3)
        assert len(rings) == 2  # the writes made meanwhile were never read
        await collection.insert_one({"_id": "after", "kind": "TIMER", "claim": None})
        assert await until(lambda: len(rings) == 3, WIRE)
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
