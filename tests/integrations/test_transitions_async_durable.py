"""AsyncDurableMachine on an async scheduler: the same semantics as DurableMachine, awaited.

Runs on :class:`fake_async_port.FakeAsyncScheduler`, a stand-in for CONTRACT section 11's
``AsyncInMemoryScheduler`` (not on this branch yet): to be re-run on the real one."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from fake_async_port import FakeAsyncScheduler

from flowsched import InMemoryScheduler
from flowsched.integrations.transitions import AsyncDurableMachine, DurableMachine

STATES = ["new", {"name": "waiting", "timeout": 30, "on_timeout": "expire"}, "paid"]


class Order:
    def __init__(self, order_id: str, state: str = "new") -> None:
        self.id = order_id
        self.state = state
        self.expired = 0

    async def expire(self) -> None:
        self.expired += 1


def test_enter_schedules_leave_cancels_timeout_awaits(async_port: FakeAsyncScheduler) -> None:
    left, stays = Order("o-1"), Order("o-2")
    AsyncDurableMachine(
        model=[left, stays], states=STATES, initial="new", scheduler=async_port, name="Orders"
    )

    async def run() -> None:
        await left.to_waiting()  # type: ignore[attr-defined]
        await stays.to_waiting()  # type: ignore[attr-defined]
        assert set(async_port.items) == {"Orders:o-1:waiting", "Orders:o-2:waiting"}
        await left.to_paid()  # type: ignore[attr-defined]
        assert set(async_port.items) == {"Orders:o-2:waiting"}
        await async_port.advance(timedelta(seconds=30))
        assert (left.expired, stays.expired) == (0, 1)
        assert async_port.items == {}

    asyncio.run(run())


def test_async_load_model_in_another_process(async_port: FakeAsyncScheduler) -> None:
    stored = {"o-1": "waiting", "o-2": "paid"}
    loaded: list[Order] = []

    async def load(order_id: str) -> Order | None:
        if order_id not in stored:
            return None
        order = Order(order_id, stored[order_id])
        loaded.append(order)
        return order

    AsyncDurableMachine(
        states=STATES, initial="new", scheduler=async_port, name="Orders", load_model=load
    )

    async def run() -> None:
        for model_id in ("o-1", "o-2", "o-9"):  # armed by a process that is gone
            await async_port.create_single_timer(
                f"Orders:{model_id}:waiting",
                timedelta(seconds=5),
                "Orders",
                {"model": model_id, "state": "waiting", "entry": f"old.{model_id}"},
            )
        await async_port.advance(timedelta(seconds=5))
        assert [(o.id, o.expired) for o in loaded] == [("o-1", 1), ("o-2", 0)]
        [dead] = await async_port.dead_letters()
        assert "model 'o-9' not found" in dead.error
        assert async_port.items == {}

    asyncio.run(run())


def test_the_faces_must_match(async_port: FakeAsyncScheduler, scheduler: InMemoryScheduler) -> None:
    with pytest.raises(TypeError, match="use AsyncDurableMachine"):
        DurableMachine(states=STATES, initial="new", scheduler=async_port, name="A")
    with pytest.raises(TypeError, match="use DurableMachine"):
        AsyncDurableMachine(states=STATES, initial="new", scheduler=scheduler, name="B")


def test_on_exception_handles_a_failing_timeout(async_port: FakeAsyncScheduler) -> None:
    seen: list[Any] = []

    class Failing(Order):
        async def expire(self, event_data: Any) -> None:  # send_event=True
            raise RuntimeError("boom")

    order = Failing("o-1")
    AsyncDurableMachine(
        model=order,
        states=STATES,
        initial="new",
        scheduler=async_port,
        name="Orders",
        send_event=True,
        on_exception=lambda event_data: seen.append(event_data.error),
    )

    async def run() -> None:
        await order.to_waiting()  # type: ignore[attr-defined]
        await async_port.advance(timedelta(seconds=30))

    asyncio.run(run())
    assert [str(e) for e in seen] == ["boom"]
    assert async_port.items == {}  # handled: not redelivered
