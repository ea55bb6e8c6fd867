"""Both drivers in real time over the reference store: delivery, and a cancel or replace
that wins over a claim waiting in a busy node's queue (CONTRACT section 15)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from datetime import timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.store import MemoryTimerStore, TimerSelection, as_async

WAIT = 10.0  # an upper bound for a test that would otherwise hang, not a timing assertion


def _item(
    scheduler: NodeScheduler | AsyncNodeScheduler, item_id: str, payload: int = 0
) -> ScheduleItem:
    return ScheduleItem(
        item_id, ScheduleKind.TIMER, scheduler.now(), payload={"v": payload}, handler="work"
    )


def _claimed(store: MemoryTimerStore, item_id: str) -> bool:
    page = store.timers(TimerSelection(id_prefix=item_id, state="claimed"))
    return any(info.id == item_id for info in page.items)


def _until(condition: object) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


def test_threads_deliver_and_a_cancel_beats_a_queued_claim() -> None:
    store = MemoryTimerStore()
    scheduler = NodeScheduler(store, workers=2, poll_interval=timedelta(milliseconds=50))
    release = threading.Event()
    ran: list[tuple[str, object]] = []

    def work(item: ScheduleItem, attempt: int) -> None:
        ran.append((item.id, (item.payload or {}).get("v")))
        if item.id.startswith("busy"):
            release.wait(WAIT)

    scheduler.register("work", work)
    with scheduler:
        scheduler.schedule(_item(scheduler, "busy1"))
        scheduler.schedule(_item(scheduler, "busy2"))
        _until(lambda: len(ran) == 2)
        scheduler.schedule(_item(scheduler, "cancelled"))
        scheduler.schedule(_item(scheduler, "replaced", 1))
        _until(lambda: _claimed(store, "cancelled") and _claimed(store, "replaced"))
        assert scheduler.cancel("cancelled") is True
        scheduler.schedule(_item(scheduler, "replaced", 2))
        release.set()
        _until(lambda: not scheduler.exists("replaced"))
    assert sorted(ran[:2]) == [("busy1", 0), ("busy2", 0)] and ran[2:] == [("replaced", 2)], ran
    assert store.history("cancelled") == [], "the cancelled form started"


def test_asyncio_delivers_and_a_cancel_beats_a_queued_claim() -> None:
    async def main() -> list[tuple[str, object]]:
        store = MemoryTimerStore()
        scheduler = AsyncNodeScheduler(
            as_async(store), workers=2, poll_interval=timedelta(milliseconds=50)
        )
        release = asyncio.Event()
        ran: list[tuple[str, object]] = []

        async def work(item: ScheduleItem, attempt: int) -> None:
            ran.append((item.id, (item.payload or {}).get("v")))
            if item.id.startswith("busy"):
                await asyncio.wait_for(release.wait(), WAIT)

        async def until(condition: object) -> None:
            deadline = time.monotonic() + WAIT
            while not condition():  # type: ignore[operator]
                assert time.monotonic() < deadline, "timed out waiting"
                await asyncio.sleep(0.005)

        scheduler.register("work", work)
        async with scheduler:
            await scheduler.schedule(_item(scheduler, "busy1"))
            await scheduler.schedule(_item(scheduler, "busy2"))
            await until(lambda: len(ran) == 2)
            await scheduler.schedule(_item(scheduler, "cancelled"))
            await scheduler.schedule(_item(scheduler, "replaced", 1))
            await until(lambda: _claimed(store, "cancelled") and _claimed(store, "replaced"))
            assert await scheduler.cancel("cancelled") is True
            await scheduler.schedule(_item(scheduler, "replaced", 2))
            release.set()
            await until(lambda: not store.exists("replaced"))
        assert store.history("cancelled") == [], "the cancelled form started"
        return ran

    ran = asyncio.run(main())
    assert sorted(ran[:2]) == [("busy1", 0), ("busy2", 0)] and ran[2:] == [("replaced", 2)], ran


def test_asyncio_handlers_each_have_their_own_context_and_know_they_are_handlers() -> None:
    """A context variable a handler sets stays its own (each handler task runs in a copy of
    one prepared context), and the driver knows its handlers (and their own tasks) for what
    they are: a handler's ``aclose()`` does not wait for itself."""
    request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="-")

    async def main() -> list[tuple[str, str, bool, bool]]:
        scheduler = AsyncNodeScheduler(
            as_async(MemoryTimerStore()), workers=4, poll_interval=timedelta(milliseconds=50)
        )
        both = asyncio.Barrier(2)
        seen: list[tuple[str, str, bool, bool]] = []

        async def work(item: ScheduleItem, attempt: int) -> None:
            before = request.get()
            request.set(item.id)
            await asyncio.wait_for(both.wait(), WAIT)  # the other handler runs meanwhile
            child = await asyncio.create_task(_in_handler(scheduler))
            seen.append((item.id, before, scheduler._driver.in_handler(), child))

        scheduler.register("work", work)
        async with scheduler:
            await scheduler.schedule(_item(scheduler, "a"))
            await scheduler.schedule(_item(scheduler, "b"))
            deadline = time.monotonic() + WAIT
            while len(seen) < 2:
                assert time.monotonic() < deadline, "timed out waiting"
                await asyncio.sleep(0.005)
            assert scheduler._driver.in_handler() is False
        return sorted(seen)

    assert asyncio.run(main()) == [("a", "-", True, True), ("b", "-", True, True)]


async def _in_handler(scheduler: AsyncNodeScheduler) -> bool:
    return scheduler._driver.in_handler()
