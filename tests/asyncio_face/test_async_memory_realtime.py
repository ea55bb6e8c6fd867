"""``AsyncInMemoryScheduler`` in real time, on the running loop: every ``async def``
delivery runs (none lost), plain handlers run off the loop, an earlier item wakes the firing
task, ``async with`` waits for handlers in flight and leaves no task behind, and a bounded
shutdown cancels the rest without settling them."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from flowsched import (
    AsyncInMemoryScheduler,
    ScheduleItem,
    ScheduleKind,
    SchedulerUnavailable,
    SchedulingConfig,
    SystemClock,
)

TIMER = ScheduleKind.TIMER
pytestmark = pytest.mark.asyncio


def soon(clock: SystemClock, ms: float) -> ScheduleItem:
    return ScheduleItem(f"t-{ms}", TIMER, clock.now() + timedelta(milliseconds=ms))


async def test_every_async_delivery_runs_none_lost() -> None:
    clock = SystemClock()
    ran: list[str] = []
    async with AsyncInMemoryScheduler(clock=clock) as scheduler:

        async def handler(item: ScheduleItem, attempt: int) -> None:
            await asyncio.sleep(0)
            ran.append(item.id)

        scheduler.subscribe(TIMER, handler)
        due = clock.now() + timedelta(milliseconds=50)
        for n in range(10_000):
            await scheduler.schedule(
                ScheduleItem(f"t{n}", TIMER, due + n * timedelta(microseconds=20))
            )
        for _ in range(3_000):  # up to 30 s on a loaded machine; ends when all ran
            if len(ran) == 10_000:
                break
            await asyncio.sleep(0.01)
        assert await scheduler.pending() == 0
    assert sorted(ran) == sorted(f"t{n}" for n in range(10_000))


async def test_plain_handlers_run_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    async with AsyncInMemoryScheduler() as scheduler:

        def handler(item: ScheduleItem, attempt: int) -> None:
            threads.append(threading.get_ident())
            loop.call_soon_threadsafe(done.set)

        scheduler.subscribe(TIMER, handler)
        await scheduler.schedule(soon(SystemClock(), 5))
        await asyncio.wait_for(done.wait(), 5)
    assert threads and threads[0] != loop_thread


async def test_an_earlier_item_wakes_the_firing_task() -> None:
    clock = SystemClock()
    fired = asyncio.Event()
    scheduler = AsyncInMemoryScheduler(clock=clock, max_wait=timedelta(hours=1))
    async with scheduler:

        async def handler(item: ScheduleItem, attempt: int) -> None:
            fired.set()

        scheduler.subscribe(TIMER, handler)
        await scheduler.schedule(soon(clock, 3_600_000))  # an hour away: the task sleeps
        await asyncio.sleep(0.01)
        await scheduler.schedule(soon(clock, 10))
        await asyncio.wait_for(fired.wait(), 2)


async def test_exit_waits_for_handlers_in_flight_and_leaves_no_task() -> None:
    before = asyncio.all_tasks()
    finished: list[str] = []
    started = asyncio.Event()
    async with AsyncInMemoryScheduler() as scheduler:

        async def handler(item: ScheduleItem, attempt: int) -> None:
            started.set()
            await asyncio.sleep(0.05)
            finished.append(item.id)

        scheduler.subscribe(TIMER, handler)
        await scheduler.schedule(soon(SystemClock(), 1))
        await asyncio.wait_for(started.wait(), 2)
    assert finished == ["t-1"]
    assert asyncio.all_tasks() - before == set()
    assert not await scheduler.exists("t-1")
    with pytest.raises(SchedulerUnavailable):
        await scheduler.schedule(soon(SystemClock(), 1))


async def test_a_bounded_shutdown_cancels_without_settling() -> None:
    before = asyncio.all_tasks()
    started = asyncio.Event()
    scheduler = AsyncInMemoryScheduler()
    await scheduler.start()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        started.set()
        await asyncio.sleep(3600)

    scheduler.subscribe(TIMER, handler)
    stored = await scheduler.schedule(soon(SystemClock(), 1))
    await asyncio.wait_for(started.wait(), 2)
    await scheduler.aclose(timeout=0.05)
    assert asyncio.all_tasks() - before == set()
    assert await scheduler.get("t-1") == stored, "a delivery cancelled by shutdown was settled"
    assert await scheduler.dead_letters() == []


async def test_concurrency_bounds_the_handlers_running_at_once() -> None:
    clock = SystemClock()
    running = peak = 0
    done = asyncio.Event()
    count = 0
    async with AsyncInMemoryScheduler(clock=clock, concurrency=3) as scheduler:

        async def handler(item: ScheduleItem, attempt: int) -> None:
            nonlocal running, peak, count
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            count += 1
            if count == 12:
                done.set()

        scheduler.subscribe(TIMER, handler)
        for n in range(12):
            await scheduler.schedule(ScheduleItem(f"t{n}", TIMER, clock.now()))
        await asyncio.wait_for(done.wait(), 5)
    assert peak == 3


async def test_from_config_reads_the_in_process_settings() -> None:
    config = SchedulingConfig.from_string(
        "ipf-scheduler.flowsched { max-attempts = 2, redelivery.initial = 1s }"
    )
    failures: list[int] = []
    async with AsyncInMemoryScheduler.from_config(config) as scheduler:

        async def handler(item: ScheduleItem, attempt: int) -> None:
            failures.append(attempt)
            raise RuntimeError("down")

        scheduler.subscribe(TIMER, handler)
        await scheduler.schedule(soon(SystemClock(), 1))
        for _ in range(300):
            if await scheduler.dead_letters():
                break
            await asyncio.sleep(0.01)
    assert failures == [0, 1]
    assert [d.attempts for d in await scheduler.dead_letters()] == [2]
