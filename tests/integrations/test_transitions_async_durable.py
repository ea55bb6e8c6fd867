"""AsyncDurableMachine on the real async scheduler: the same semantics as DurableMachine,
awaited, on ``AsyncInMemoryScheduler`` (the test kit's ``async_memory_scheduler``) with
``await manual_clock.advance_async(...)`` for time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowsched import AsyncInMemoryScheduler, InMemoryScheduler, ManualClock
from flowsched.integrations.transitions import AsyncDurableMachine, DurableMachine

STATES = ["new", {"name": "waiting", "timeout": 30, "on_timeout": "expire"}, "paid"]


class Order:
    def __init__(self, order_id: str, state: str = "new") -> None:
        self.id = order_id
        self.state = state
        self.expired = 0

    async def expire(self) -> None:
        self.expired += 1


async def scheduled(scheduler: AsyncInMemoryScheduler) -> set[str]:
    """The ids of the timers armed by the machines' names below (and proof there are no
    others: ``pending()`` counts every item)."""
    candidates = {f"Orders:o-{n}:waiting" for n in range(1, 10)}
    found = {item_id for item_id in candidates if await scheduler.exists(item_id)}
    assert await scheduler.pending() == len(found)
    return found


async def timer_for_a_gone_process(scheduler: AsyncInMemoryScheduler, model_id: str) -> None:
    """What an old process left behind: an armed timeout for ``model_id``."""
    await scheduler.create_single_timer(
        f"Orders:{model_id}:waiting",
        timedelta(seconds=5),
        "Orders",
        {"model": model_id, "state": "waiting", "entry": f"old.{model_id}"},
    )


@pytest.mark.asyncio
async def test_enter_schedules_leave_cancels_timeout_awaits(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    left, stays = Order("o-1"), Order("o-2")
    AsyncDurableMachine(
        model=[left, stays],
        states=STATES,
        initial="new",
        scheduler=async_memory_scheduler,
        name="Orders",
    )

    await left.to_waiting()  # type: ignore[attr-defined]
    await stays.to_waiting()  # type: ignore[attr-defined]
    assert await scheduled(async_memory_scheduler) == {"Orders:o-1:waiting", "Orders:o-2:waiting"}
    await left.to_paid()  # type: ignore[attr-defined]
    assert await scheduled(async_memory_scheduler) == {"Orders:o-2:waiting"}
    await manual_clock.advance_async(timedelta(seconds=29))
    assert (left.expired, stays.expired) == (0, 0)
    await manual_clock.advance_async(timedelta(seconds=1))
    assert (left.expired, stays.expired) == (0, 1)
    assert await scheduled(async_memory_scheduler) == set()


@pytest.mark.asyncio
async def test_async_load_model_in_another_process(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    stored = {"o-1": "waiting", "o-2": "paid"}
    loaded: list[Order] = []

    async def load(order_id: str) -> Order | None:
        if order_id not in stored:
            return None
        order = Order(order_id, stored[order_id])
        loaded.append(order)
        return order

    AsyncDurableMachine(
        states=STATES,
        initial="new",
        scheduler=async_memory_scheduler,
        name="Orders",
        load_model=load,
    )

    for model_id in ("o-1", "o-2", "o-9"):  # armed by a process that is gone
        await timer_for_a_gone_process(async_memory_scheduler, model_id)
    await manual_clock.advance_async(timedelta(seconds=5))
    assert [(o.id, o.expired) for o in loaded] == [("o-1", 1), ("o-2", 0)]
    [dead] = await async_memory_scheduler.dead_letters()
    assert "model 'o-9' not found" in dead.error
    assert await scheduled(async_memory_scheduler) == set()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("load_model", "reason"),
    [
        (None, "no load_model was given"),
        ("returns None", "load_model returned None"),
        ("raises KeyError", "load_model raised KeyError: 'o-9'"),
    ],
)
async def test_a_model_that_cannot_be_loaded_is_a_dead_letter_with_the_reason(
    async_memory_scheduler: AsyncInMemoryScheduler,
    manual_clock: ManualClock,
    load_model: str | None,
    reason: str,
) -> None:
    calls: list[str] = []

    async def returns_none(order_id: str) -> Order | None:
        calls.append(order_id)
        return None

    async def raises_key_error(order_id: str) -> Order:
        calls.append(order_id)
        raise KeyError(order_id)

    loaders = {"returns None": returns_none, "raises KeyError": raises_key_error}
    AsyncDurableMachine(
        states=STATES,
        initial="new",
        scheduler=async_memory_scheduler,
        name="Orders",
        load_model=None if load_model is None else loaders[load_model],
    )
    await timer_for_a_gone_process(async_memory_scheduler, "o-9")

    await manual_clock.advance_async(timedelta(seconds=5))
    await manual_clock.advance_async(timedelta(hours=1))  # a dead letter now, not a retry loop

    assert calls == ([] if load_model is None else ["o-9"])
    [dead] = await async_memory_scheduler.dead_letters()
    assert (dead.item.id, dead.attempts) == ("Orders:o-9:waiting", 1)
    assert dead.error == f"Undeliverable: machine 'Orders': model 'o-9' not found ({reason})"
    assert dead.dead_at == manual_clock.now() - timedelta(hours=1)
    assert not await async_memory_scheduler.exists("Orders:o-9:waiting")


@pytest.mark.asyncio
async def test_a_failing_timeout_without_on_exception_is_redelivered(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    class FailsOnce(Order):
        async def expire(self) -> None:
            self.expired += 1
            if self.expired == 1:
                raise RuntimeError("database down")

    order = FailsOnce("o-1")
    AsyncDurableMachine(
        model=order,
        states=STATES,
        initial="new",
        scheduler=async_memory_scheduler,
        name="Orders",
    )
    await order.to_waiting()  # type: ignore[attr-defined]

    await manual_clock.advance_async(timedelta(seconds=30))
    assert order.expired == 1
    assert await async_memory_scheduler.exists("Orders:o-1:waiting")  # kept, for a retry
    await manual_clock.advance_async(timedelta(minutes=5))
    assert order.expired == 2
    assert await scheduled(async_memory_scheduler) == set()
    assert await async_memory_scheduler.dead_letters() == []


def test_the_faces_must_match(scheduler: InMemoryScheduler) -> None:
    async_scheduler = AsyncInMemoryScheduler(clock=ManualClock())
    with pytest.raises(TypeError, match="use AsyncDurableMachine"):
        DurableMachine(states=STATES, initial="new", scheduler=async_scheduler, name="A")
    with pytest.raises(TypeError, match="use DurableMachine"):
        AsyncDurableMachine(states=STATES, initial="new", scheduler=scheduler, name="B")


def test_a_scheduler_must_be_a_flowsched_port() -> None:
    class LooksLikeOne:
        async def create_single_timer(self, *args: Any) -> None: ...
        async def cancel(self, item_id: str) -> bool: ...
        async def get(self, item_id: str) -> None: ...
        def register(self, *args: Any) -> None: ...

    for cls in (AsyncDurableMachine, DurableMachine):
        with pytest.raises(TypeError, match=r"SchedulerPort or AsyncSchedulerPort.*LooksLikeOne"):
            cls(states=STATES, initial="new", scheduler=LooksLikeOne(), name="C")


@pytest.mark.asyncio
async def test_on_exception_handles_a_failing_timeout(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    seen: list[Any] = []

    class Failing(Order):
        async def expire(self, event_data: Any) -> None:  # send_event=True
            raise RuntimeError("boom")

    order = Failing("o-1")
    AsyncDurableMachine(
        model=order,
        states=STATES,
        initial="new",
        scheduler=async_memory_scheduler,
        name="Orders",
        send_event=True,
        on_exception=lambda event_data: seen.append(event_data.error),
    )

    await order.to_waiting()  # type: ignore[attr-defined]
    await manual_clock.advance_async(timedelta(seconds=30))
    await manual_clock.advance_async(timedelta(minutes=5))  # handled: not redelivered
    assert [str(e) for e in seen] == ["boom"]
    assert await scheduled(async_memory_scheduler) == set()
    assert await async_memory_scheduler.dead_letters() == []
