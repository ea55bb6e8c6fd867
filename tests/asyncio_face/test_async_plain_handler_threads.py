"""Plain (non-``async``) handlers on the asyncio face run on a pool of the scheduler's own,
one thread per handler slot: a delivery whose start was recorded (start on claim, CONTRACT
section 15) never waits for a thread. With the loop's default executor (min(32, cores + 4)
threads) the forty handlers below could not all run at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from flowsched import AsyncInMemoryScheduler, ScheduleItem, ScheduleKind

pytestmark = pytest.mark.asyncio
TIMER = ScheduleKind.TIMER
N = 40  # more than the default executor's threads on any host (at most 32)
WAIT = 10.0  # seconds: a bound against hanging, never a timing assertion


async def _all_run_at_once(scheduler: Any) -> None:
    together = threading.Barrier(N, timeout=WAIT)
    passed: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        together.wait()  # breaks (raises) unless all N handlers run at the same time
        passed.append(item.id)

    scheduler.subscribe(TIMER, handler)
    async with scheduler:
        for n in range(N):
            await scheduler.schedule(ScheduleItem(f"t-{n}", TIMER, datetime.now(UTC)))
        from async_kit import until

        assert await until(lambda: len(passed) == N, seconds=2 * WAIT)
    assert not together.broken


async def test_the_in_memory_face_runs_every_slot_s_plain_handler_at_once() -> None:
    await _all_run_at_once(AsyncInMemoryScheduler(concurrency=N))


async def test_the_mongo_face_runs_every_slot_s_plain_handler_at_once() -> None:
    pytest.importorskip("mongomock")
    from async_kit import mongomock_collection

    from flowsched import AsyncMongoScheduler

    collection: Any = mongomock_collection()
    await _all_run_at_once(AsyncMongoScheduler(collection, concurrency=N))


async def test_with_a_caller_s_executor_the_mongo_face_records_no_start_on_the_claim() -> None:
    # A caller's executor (from_config's has `workers` threads) may be smaller than the
    # slots: a plain handler may wait there for a thread, so no claim records its start
    # before its handler is called; each is checked first (flowsched.node.core).
    pytest.importorskip("mongomock")
    from concurrent.futures import ThreadPoolExecutor

    from async_kit import mongomock_collection, until

    from flowsched import AsyncMongoScheduler

    collection: Any = mongomock_collection()
    executor = ThreadPoolExecutor(2)
    scheduler = AsyncMongoScheduler(collection, concurrency=6, executor=executor)
    release = threading.Event()
    called: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        called.append(item.id)
        release.wait(WAIT)

    scheduler.subscribe(TIMER, handler)
    for n in range(6):
        await scheduler.schedule(ScheduleItem(f"t-{n}", TIMER, datetime.now(UTC)))
    try:
        async with scheduler:
            assert await until(lambda: len(called) == 2)
            recorded = collection.count_documents({"claim.started": {"$exists": True}})
            release.set()
            assert await until(lambda: len(called) == 6)
        assert recorded == 0
    finally:
        release.set()
        executor.shutdown(wait=False)
