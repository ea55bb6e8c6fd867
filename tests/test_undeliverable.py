"""A handler raising ``Undeliverable`` dead-letters its timer at once, on both adapters and
on the async face (``AsyncInMemoryScheduler``, ``async def`` or plain handlers):
with its reason, ``on_failed`` told, no redelivery, whatever ``max_attempts`` is."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched import (
    AsyncInMemoryScheduler,
    DeadLetter,
    ManualClock,
    ScheduleItem,
    SchedulerPort,
    Undeliverable,
)


def test_undeliverable_is_a_dead_letter_now(
    scheduler: SchedulerPort, manual_clock: ManualClock
) -> None:
    calls: list[int] = []
    told: list[DeadLetter] = []

    def handler(item: object, attempt: int) -> None:
        calls.append(attempt)
        raise Undeliverable("model 'm-1' not found")

    scheduler.register("gone", handler, on_failed=told.append)
    scheduler.create_single_timer("t-1", timedelta(seconds=1), "gone", {"model": "m-1"})
    manual_clock.advance(timedelta(seconds=1))
    manual_clock.advance(timedelta(minutes=10))  # nothing is redelivered

    assert calls == [0]
    [dead] = scheduler.dead_letters()
    assert (dead.item.id, dead.attempts) == ("t-1", 1)
    assert dead.error == "Undeliverable: model 'm-1' not found"
    assert [d.item.id for d in told] == ["t-1"]
    assert not scheduler.exists("t-1")
    assert scheduler.requeue("t-1")


@pytest.mark.asyncio
async def test_undeliverable_is_a_dead_letter_now_on_the_async_face(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    calls: list[int] = []
    told: list[DeadLetter] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        calls.append(attempt)
        raise Undeliverable("model 'm-1' not found")

    async_memory_scheduler.register("gone", handler, on_failed=told.append)
    await async_memory_scheduler.create_single_timer(
        "t-1", timedelta(seconds=1), "gone", {"model": "m-1"}
    )
    await manual_clock.advance_async(timedelta(seconds=1))
    await manual_clock.advance_async(timedelta(minutes=10))  # nothing is redelivered

    assert calls == [0]
    [dead] = await async_memory_scheduler.dead_letters()
    assert (dead.item.id, dead.attempts) == ("t-1", 1)
    assert dead.error == "Undeliverable: model 'm-1' not found"
    assert [d.item.id for d in told] == ["t-1"]
    assert not await async_memory_scheduler.exists("t-1")
    assert await async_memory_scheduler.requeue("t-1")


@pytest.mark.asyncio
async def test_a_plain_handler_raising_undeliverable_on_the_async_face_too(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    def handler(item: ScheduleItem, attempt: int) -> None:  # runs in a worker thread
        raise Undeliverable(f"order {item.payload['order']!r} no longer exists")

    async_memory_scheduler.register("orders", handler)
    await async_memory_scheduler.create_single_timer(
        "t-2", timedelta(seconds=1), "orders", {"order": "o-7"}
    )
    await manual_clock.advance_async(timedelta(minutes=10))

    [dead] = await async_memory_scheduler.dead_letters()
    assert (dead.item.id, dead.attempts) == ("t-2", 1)
    assert dead.error == "Undeliverable: order 'o-7' no longer exists"


def test_dead_letters_of_one_instant_are_listed_in_the_order_they_died() -> None:
    """Same due time, scheduled ``b`` then ``a``: both fail once with ``max_attempts=1``,
    on a manual clock, so they die at the same instant: ``b`` first (found by the stateful
    model test after the in-memory scheduler moved onto the node core)."""
    from datetime import UTC, datetime, timedelta

    from flowsched import (
        InMemoryScheduler,
        ManualClock,
        RedeliveryPolicy,
        ScheduleItem,
        ScheduleKind,
    )

    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    scheduler = InMemoryScheduler(clock=clock, redelivery=RedeliveryPolicy(max_attempts=1))

    def fail(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError(f"{item.id} fails")

    scheduler.subscribe(ScheduleKind.TIMER, fail)
    for name in ("b", "a"):
        scheduler.schedule(ScheduleItem(name, ScheduleKind.TIMER, clock.now()))
    clock.advance(timedelta(0))
    assert [dead.item.id for dead in scheduler.dead_letters()] == ["b", "a"]
