"""Checks only the asyncio face has: ``async def`` handlers awaited (never dropped), plain
handlers off the loop, calls awaited from inside handlers, ``async with`` leaving no task,
``aclose`` waiting for handlers in flight, and honest cancellation on shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from flowsched.async_port import AsyncSchedulerPort
from flowsched.clock import ManualClock
from flowsched.port import ScheduleItem, ScheduleKind

__all__ = ["ASYNC_GUARANTEES", "AsyncGuarantee", "AsyncTrial"]

TIMER = ScheduleKind.TIMER
S = timedelta(seconds=1)


@dataclass
class AsyncTrial:
    """A started async ``scheduler`` on ``clock``, on the running loop."""

    scheduler: AsyncSchedulerPort
    clock: ManualClock
    seen: list[tuple[str, int, datetime]] = field(default_factory=list)

    def at(self, seconds: float = 0) -> datetime:
        return self.clock.now() + timedelta(seconds=seconds)

    async def timer(self, item_id: str, due: datetime) -> ScheduleItem:
        return await self.scheduler.schedule(ScheduleItem(item_id, TIMER, due))


@dataclass(frozen=True)
class AsyncGuarantee:
    """One promise of the async face, and the coroutine that tries it."""

    name: str
    check: Callable[[AsyncTrial], Awaitable[None]]


async def _async_handlers_are_awaited(t: AsyncTrial) -> None:
    s = t.scheduler

    async def handler(item: ScheduleItem, attempt: int) -> None:
        await asyncio.sleep(0)  # a real suspension: the item must wait for the rest
        t.seen.append((item.id, attempt, t.clock.now()))

    s.subscribe(TIMER, handler)
    for n in range(200):
        await t.timer(f"t{n}", t.at(1 + n % 7))
    await t.clock.advance_async(10 * S)
    assert len(t.seen) == 200, f"{len(t.seen)} of 200 async def handlers ran to their end"
    left = [n for n in range(200) if await s.exists(f"t{n}")]
    assert left == [], f"{len(left)} items still scheduled after their handler returned"
    assert all(at == t.at(-10) + (1 + int(i[1:]) % 7) * S for i, _, at in t.seen), (
        "an async handler did not see clock.now() equal to its item's due time"
    )


async def _async_failures_are_redelivered(t: AsyncTrial) -> None:
    s = t.scheduler

    async def handler(item: ScheduleItem, attempt: int) -> None:
        await asyncio.sleep(0)
        t.seen.append((item.id, attempt, t.clock.now()))
        if attempt < 2:
            raise RuntimeError("not yet")

    s.subscribe(TIMER, handler)
    await t.timer("t", t.at(1))
    await t.clock.advance_async(30 * S)
    got = [(attempt, at - t.at(-30)) for _, attempt, at in t.seen]
    assert got == [(0, S), (1, 4 * S), (2, 10 * S)], f"(attempt, time) {got}: expected 1, 4, 10 s"
    assert not await s.exists("t"), "the item is still scheduled after its handler succeeded"


async def _plain_handlers_run_off_the_loop(t: AsyncTrial) -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        threads.append(threading.get_ident())

    t.scheduler.subscribe(TIMER, handler)
    await t.timer("t", t.at(1))
    await t.clock.advance_async(S)
    assert len(threads) == 1, f"the plain handler ran {len(threads)} times, expected once"
    assert threads[0] != loop_thread, "a plain handler ran on the event loop's thread"
    assert not await t.scheduler.exists("t"), "the plain handler's item is still scheduled"


async def _handlers_await_the_scheduler(t: AsyncTrial) -> None:
    s = t.scheduler

    async def handler(item: ScheduleItem, attempt: int) -> None:
        t.seen.append((item.id, attempt, t.clock.now()))
        if item.id == "first":
            await s.schedule(ScheduleItem("follow-up", TIMER, t.clock.now() + 2 * S))
            assert await s.cancel("cancelled"), "cancel() from a handler found nothing"

    s.subscribe(TIMER, handler)
    await t.timer("first", t.at(1))
    await t.timer("cancelled", t.at(2))
    await t.clock.advance_async(5 * S)
    got = [(i, at - t.at(-5)) for i, _, at in t.seen]
    assert got == [("first", S), ("follow-up", 3 * S)], f"delivered {got}"


_DRIVER_READS = frozenset(
    {"_poll_cancellation", "PyMongoProtocol.read", "AsyncPeriodicExecutor._run"}
)


def _drivers_own(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` is pymongo's, not the scheduler's: one of the two that its network
    layer starts for every reply it awaits (its server monitor's heartbeat starts a pair
    whenever a reply comes), or one of the client's monitors (``AsyncPeriodicExecutor``),
    started at its first command - the client is the caller's, and lives on after
    ``aclose()``. A command of the scheduler's own still in flight shows as the task that
    awaits it, which this does not pass over."""
    return getattr(task.get_coro(), "__qualname__", "") in _DRIVER_READS


async def _no_task_left_behind(t: AsyncTrial) -> None:
    before = asyncio.all_tasks()
    done: list[str] = []
    started = asyncio.Event()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        started.set()
        await asyncio.sleep(0.01)
        done.append(item.id)

    t.scheduler.subscribe(TIMER, handler)
    await t.timer("t", t.at(1))
    advancing = asyncio.ensure_future(t.clock.advance_async(S))
    await started.wait()
    await t.scheduler.aclose()
    assert done == ["t"], "aclose() returned before the handler in flight had finished"
    await advancing
    left = {task for task in asyncio.all_tasks() - before if not _drivers_own(task)}
    assert not left, f"tasks left behind after aclose(): {sorted(map(repr, left))}"
    assert not await t.scheduler.exists("t"), "the finished handler's item was not settled"


async def _cancelled_by_shutdown_is_not_settled(t: AsyncTrial) -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # never returns by itself
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    t.scheduler.subscribe(TIMER, handler)
    stored = await t.timer("t", t.at(1))
    advancing = asyncio.ensure_future(t.clock.advance_async(S))
    await started.wait()
    aclose = getattr(t.scheduler, "aclose")  # noqa: B009 - the timeout is this check's
    try:
        await asyncio.wait_for(aclose(timeout=0.05), timeout=10)
    except TypeError:
        # An adapter whose aclose() takes no timeout: cancel the close from outside.
        closing = asyncio.ensure_future(aclose())
        await asyncio.sleep(0.05)
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
    await asyncio.gather(advancing, return_exceptions=True)
    assert cancelled == [True], "the handler in flight was not cancelled by a bounded shutdown"
    got = await t.scheduler.get("t")
    assert got is not None, "an item whose handler was cancelled by shutdown was settled"
    assert got.due == stored.due, "a delivery cancelled by shutdown counted as a failure"
    assert await t.scheduler.dead_letters() == [], "a cancelled delivery was dead-lettered"


async def _own_cancelled_error_is_a_failure(t: AsyncTrial) -> None:
    async def handler(item: ScheduleItem, attempt: int) -> None:
        t.seen.append((item.id, attempt, t.clock.now()))
        if attempt == 0:
            raise asyncio.CancelledError  # the handler's own, no cancel request

    t.scheduler.subscribe(TIMER, handler)
    await t.timer("t", t.at(1))
    await t.clock.advance_async(5 * S)
    attempts = [attempt for _, attempt, _ in t.seen]
    assert attempts == [0, 1], f"attempts {attempts}: a handler's own CancelledError is a failure"


async def _steering_is_awaited(t: AsyncTrial) -> None:
    s: Any = t.scheduler
    for n in range(7):
        await t.timer(f"s{n}", t.at(1 + n))
    page = await s.timers(limit=3)
    assert [i.id for i in page.items] == ["s0", "s1", "s2"], f"await timers(limit=3): {page}"
    iterator = s.iter_timers(limit=3)
    assert hasattr(iterator, "__anext__"), f"iter_timers() gave {iterator!r}, no async iterator"
    listed = [info.id async for info in iterator]
    assert listed == [f"s{n}" for n in range(7)], f"async for over iter_timers(): {listed}"
    assert await s.pause("s0") is True, "await pause() of a scheduled item was not True"
    await t.clock.advance_async(2 * S)
    state = [i.state for i in (await s.timers(id_prefix="s0")).items]
    assert state == ["paused"], f"a paused item after its time shows {state}"
    assert await s.resume("s0") is True, "await resume() of a paused item was not True"
    assert await s.resume("none") is False, "await resume() of an unknown id was not False"


ASYNC_GUARANTEES = (
    AsyncGuarantee(
        "async def handlers are awaited to their end before their item completes",
        _async_handlers_are_awaited,
    ),
    AsyncGuarantee(
        "an async def handler that raises is redelivered with backoff",
        _async_failures_are_redelivered,
    ),
    AsyncGuarantee(
        "plain handlers run in a worker thread, not on the loop", _plain_handlers_run_off_the_loop
    ),
    AsyncGuarantee(
        "a handler may await schedule() and cancel(); follow-ups inside the window fire",
        _handlers_await_the_scheduler,
    ),
    AsyncGuarantee(
        "aclose() waits for the handler in flight and leaves no task behind",
        _no_task_left_behind,
    ),
    AsyncGuarantee(
        "a delivery cancelled by shutdown is not settled (delivered again later)",
        _cancelled_by_shutdown_is_not_settled,
    ),
    AsyncGuarantee(
        "a CancelledError a handler raises of its own accord is a failed delivery",
        _own_cancelled_error_is_a_failure,
    ),
    AsyncGuarantee(
        "timers(), pause() and resume() are awaited; iter_timers() is an async iterator",
        _steering_is_awaited,
    ),
)
