"""``AsyncMongoScheduler`` keeps the lease rules of the threaded node (the same node core,
:mod:`flowsched.node.core`): no handler starts on a claim whose lease has ended (the loop
was blocked past it, or its item was replaced meanwhile), and a run that completes after its
lease ended is a late completion - logged, counted, settled on its generation - never a
failure. In virtual time (``advance_async``) and in real time. (The core's own rules, a
queued claim a renewal finds taken dropped unstarted, are pinned in ``tests/node``.)"""

from __future__ import annotations

import asyncio
import logging
import time
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
from flowsched.observe import MetricsObserver  # noqa: E402

pytestmark = pytest.mark.asyncio

TIMER = ScheduleKind.TIMER
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=10)


@pytest.fixture
def collection() -> Any:
    return mongomock_collection()


async def test_run_due_gives_back_a_claim_whose_lease_ended_before_its_turn_and_runs_it_later(
    collection: Any, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(START)
    metrics = MetricsObserver()
    scheduler = AsyncMongoScheduler(
        collection, node_id="a", clock=clock, lease=LEASE, observer=metrics
    )
    ran: list[tuple[str, datetime]] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, clock.now()))
        if item.id == "a-slow":
            await clock.advance_async(3 * LEASE)  # this run outlives its lease (and b's)

    scheduler.subscribe(TIMER, handler)
    for item_id in ("a-slow", "b-next"):
        await scheduler.schedule(ScheduleItem(item_id, TIMER, START))
    async with scheduler:
        with caplog.at_level(logging.WARNING, "flowsched.node"):
            await clock.advance_async(timedelta(seconds=1))

        # b-next is not run on a claim that lapsed while a-slow ran: it runs once, on a
        # live claim, after a-slow's run (one claim at a time in virtual time).
        assert ran == [("a-slow", START), ("b-next", START + 3 * LEASE)]
        messages = [r.getMessage() for r in caplog.records]
        late = "completed 20.000s after its lease ended"
        assert any(m.startswith("a-slow#") and late in m for m in messages)
        snapshot = metrics.snapshot()
        assert (snapshot.late_completions, snapshot.completed, snapshot.failed) == (1, 2, 0)
        assert not await scheduler.exists("a-slow") and not await scheduler.exists("b-next")


async def test_a_loop_blocked_past_the_lease_starts_none_of_the_claims_it_waited_with(
    collection: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # One handler at a time; the first blocks the event loop (a CPU-bound or blocking call in
    # an ``async def``) past the 1 s lease, so nothing renews the second claim meanwhile.
    metrics = MetricsObserver()
    ran: list[tuple[str, int]] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, attempt))
        if item.id == "a-blocks":
            time.sleep(1.5)

    node = AsyncMongoScheduler(
        collection,
        node_id="a",
        poll_interval=timedelta(milliseconds=50),
        lease=timedelta(seconds=1),
        concurrency=1,
        observer=metrics,
    )
    node.subscribe(TIMER, handler)
    for item_id in ("a-blocks", "b-waits"):
        await node.schedule(ScheduleItem(item_id, TIMER, node.now()))
    with caplog.at_level(logging.WARNING, "flowsched.node"):
        async with node:
            assert await until(lambda: collection.count_documents({}) == 0)

    assert ran == [("a-blocks", 0), ("b-waits", 0)]  # b on a live claim, its attempt uncounted
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("a-blocks#") and "after its lease ended" in m for m in messages)
    snapshot = metrics.snapshot()
    assert (snapshot.late_completions, snapshot.completed, snapshot.failed) == (1, 2, 0)


async def test_a_claim_a_renewal_found_taken_over_is_given_back_unrun(collection: Any) -> None:
    # b-queued waits for the one handler slot; meanwhile another node replaces it (a new
    # generation, no claim): its old form never runs, the replacement runs once.
    release = asyncio.Event()
    ran: list[tuple[str, int | None]] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, item.generation))
        if item.id == "a-running":
            await release.wait()

    node = AsyncMongoScheduler(
        collection,
        node_id="a",
        poll_interval=timedelta(milliseconds=50),
        lease=timedelta(seconds=1.5),  # renewed every 0.5 s
        concurrency=1,
    )
    node.subscribe(TIMER, handler)
    other = MongoScheduler(collection, node_id="other")  # the same (host) time as node a
    async with node:
        for item_id in ("a-running", "b-queued"):
            await node.schedule(ScheduleItem(item_id, TIMER, node.now()))
        assert await until(lambda: [i for i, _ in ran] == ["a-running"])
        replaced = other.schedule(ScheduleItem("b-queued", TIMER, node.now()))
        await asyncio.sleep(1.0)  # at least one renewal: it finds b-queued's claim gone
        release.set()
        assert await until(lambda: collection.count_documents({}) == 0)

    assert ran[0][0] == "a-running"
    assert ran[1:] == [("b-queued", replaced.generation)]  # the replacement only, once


async def test_a_run_whose_item_was_replaced_meanwhile_is_not_late_and_spares_the_new(
    collection: Any,
) -> None:
    metrics = MetricsObserver()
    release = asyncio.Event()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        await release.wait()

    node = AsyncMongoScheduler(
        collection,
        node_id="a",
        poll_interval=timedelta(milliseconds=50),
        lease=timedelta(seconds=1.5),
        observer=metrics,
    )
    node.subscribe(TIMER, handler)
    other = MongoScheduler(collection, node_id="other")  # the same (host) time as node a
    async with node:
        await node.schedule(ScheduleItem("x", TIMER, node.now()))
        assert await until(lambda: collection.count_documents({"claim.owner": "a"}) == 1)
        later = node.now() + timedelta(hours=1)
        replacement = other.schedule(ScheduleItem("x", TIMER, later))
        await asyncio.sleep(1.0)  # a renewal finds the claim gone: its lease ends there
        release.set()
        assert await until(lambda: metrics.snapshot().completed == 1)

    # Its item was replaced meanwhile: no late completion (CONTRACT section 15), and its
    # fenced settlement leaves the replacement alone.
    assert metrics.snapshot().late_completions == 0
    assert other.get("x") == replacement


# -- the wire server: the blocked loop through pymongo's AsyncMongoClient ---------------------


@pytest.mark.wire
async def test_on_the_server_a_loop_blocked_past_the_lease_runs_the_waiting_claim_once(
    mongo_uri: str, mongo_db: Any
) -> None:
    from pymongo import AsyncMongoClient

    client: Any = AsyncMongoClient(mongo_uri, tz_aware=True)
    metrics = MetricsObserver()
    ran: list[tuple[str, int]] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, attempt))
        if item.id == "a-blocks":
            time.sleep(3.0)  # blocks the loop past the 2 s lease: nothing renews meanwhile

    node = AsyncMongoScheduler(
        client[mongo_db.name]["timers"],
        node_id="a",
        poll_interval=timedelta(milliseconds=100),
        lease=timedelta(seconds=2),
        concurrency=1,
        observer=metrics,
    )
    node.subscribe(TIMER, handler)
    try:
        # Both well past due, so the first claim takes both whatever the clock's error
        # bound (a busy host: a due time judged on the safe side may miss one just stored).
        for ago, item_id in ((2, "a-blocks"), (1, "b-waits")):
            await node.schedule(ScheduleItem(item_id, TIMER, node.now() - timedelta(seconds=ago)))
        async with node:
            assert await until(lambda: metrics.snapshot().completed == 2, 30)
    finally:
        await client.close()

    # After the block, two requests race to the server: the start check of 'b-waits' and the
    # renewal of the leases held. A check first finds the lease ended: the claim is given
    # back and claimed afresh (said in the log). A renewal first extends the lease (the
    # claim's token still matched: nobody took it over), and the check finds it alive.
    # Either way 'b-waits' runs once, on a live lease; the mongomock twin above pins the
    # first path.
    assert ran == [("a-blocks", 0), ("b-waits", 0)]
    assert metrics.snapshot().late_completions == 1  # 'a-blocks' ended past its lease
    assert mongo_db["timers"].count_documents({}) == 0


async def test_a_plain_handler_still_running_at_shutdown_keeps_its_claim(collection: Any) -> None:
    """``aclose(timeout=…)`` cancels the delivery of a plain handler that is still running in
    its worker thread, which goes on. Its claim stays until the lease ends - it was given
    back, and another node ran the same attempt beside the thread."""
    import threading

    started, release, runs = threading.Event(), threading.Event(), []

    def plain(item: ScheduleItem, attempt: int) -> None:
        runs.append(("async node", attempt))
        started.set()
        release.wait(10)

    node = AsyncMongoScheduler(
        collection, node_id="a", poll_interval=timedelta(milliseconds=20), lease=LEASE
    )
    node.register("slow", plain)
    await node.start()
    await node.create_single_timer("t-1", timedelta(0), "slow")
    await until(started.is_set)
    await node.aclose(timeout=0.05)
    try:
        claim = collection.find_one({"_id": "t-1"})["claim"]
        assert claim is not None and claim["owner"] == "a"  # kept, not given back
        lease_until = claim["lease_until"].replace(tzinfo=UTC)
        clock = ManualClock(lease_until - timedelta(seconds=1))
        other = MongoScheduler(collection, node_id="s", clock=clock)
        other.register("slow", lambda item, attempt: runs.append(("sync node", attempt)))
        assert other.run_due() == 0  # the lease holds: not run beside the thread
        clock.advance(timedelta(seconds=2))
        assert other.run_due() == 1  # delivered again once it ends
        assert runs == [("async node", 0), ("sync node", 0)]
    finally:
        release.set()
