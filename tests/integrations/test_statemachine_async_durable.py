"""StatechartTimers on the real async scheduler (``AsyncInMemoryScheduler``, the test kit's
``async_memory_scheduler``): async listeners arm and cancel through ``await``, a machine is
found again by an ``async def`` ``load_machine``, and a machine that cannot be found is a
dead letter with the reason (not a redelivery loop)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("statemachine")

from statemachine import State, StateChart

from flowsched import AsyncInMemoryScheduler, InMemoryScheduler, ManualClock
from flowsched.integrations.statemachine import StatechartTimers, durable_timeout


class Request(StateChart):
    requesting = State(initial=True, invoke=durable_timeout("30s", on="request_timeout"))
    answered = State(final=True)
    timed_out = State(final=True)
    answer = requesting.to(answered)
    request_timeout = requesting.to(timed_out)


class Record:
    """A model as an application stores it: the state value is all python-statemachine needs."""

    def __init__(self, state: str | None = None) -> None:
        self.state = state


async def started(timers: StatechartTimers, machine_id: str, model: Any = None) -> Any:
    machine = Request(model=model, listeners=[timers.listener(machine_id)])
    await machine.activate_initial_state()
    return machine


async def timer_for_a_gone_process(scheduler: AsyncInMemoryScheduler, machine_id: str) -> None:
    """What an old process left behind: an armed timeout for ``machine_id``."""
    await scheduler.create_single_timer(
        f"Request:{machine_id}:requesting",
        timedelta(seconds=1),
        "Request",
        {"model": machine_id, "state": "requesting", "entry": f"old.{machine_id}"},
    )


@pytest.mark.asyncio
async def test_entering_arms_and_leaving_cancels(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    timers = StatechartTimers(async_memory_scheduler, name="Request")
    first = await started(timers, "r-1")
    second = await started(timers, "r-2")
    item = await async_memory_scheduler.get("Request:r-1:requesting")
    assert item is not None and item.handler == "Request"
    assert item.due == manual_clock.now() + timedelta(seconds=30)

    await first.send("answer")
    assert not await async_memory_scheduler.exists("Request:r-1:requesting")
    await manual_clock.advance_async(timedelta(seconds=29))
    assert "requesting" in second.configuration_values
    await manual_clock.advance_async(timedelta(seconds=1))
    assert "answered" in first.configuration_values
    assert "timed_out" in second.configuration_values
    assert await async_memory_scheduler.pending() == 0


@pytest.mark.asyncio
async def test_an_async_load_machine_restores_a_machine_armed_elsewhere(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    records = {"r-1": Record("requesting"), "r-2": Record("answered")}

    async def load(machine_id: str) -> Any:
        return await started(timers, machine_id, records[machine_id])

    timers = StatechartTimers(async_memory_scheduler, name="Request", load_machine=load)
    for machine_id in records:  # armed by a process that is gone
        await timer_for_a_gone_process(async_memory_scheduler, machine_id)

    await manual_clock.advance_async(timedelta(seconds=1))
    assert records["r-1"].state == "timed_out"
    assert records["r-2"].state == "answered"
    assert await async_memory_scheduler.pending() == 0
    assert await async_memory_scheduler.dead_letters() == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("load_machine", "reason"),
    [
        (None, "no load_machine"),
        ("returns None", "load_machine returned None"),
        ("raises KeyError", "load_machine raised KeyError: 'r-9'"),
        ("async, raises KeyError", "load_machine raised KeyError: 'r-9'"),
    ],
)
async def test_a_machine_that_cannot_be_loaded_is_a_dead_letter_with_the_reason(
    async_memory_scheduler: AsyncInMemoryScheduler,
    manual_clock: ManualClock,
    load_machine: str | None,
    reason: str,
) -> None:
    calls: list[str] = []

    async def returns_none(machine_id: str) -> None:
        calls.append(machine_id)

    def raises_key_error(machine_id: str) -> Any:
        calls.append(machine_id)
        raise KeyError(machine_id)

    async def async_raises_key_error(machine_id: str) -> Any:
        return raises_key_error(machine_id)

    loaders = {
        "returns None": returns_none,
        "raises KeyError": raises_key_error,
        "async, raises KeyError": async_raises_key_error,
    }
    StatechartTimers(
        async_memory_scheduler,
        name="Request",
        load_machine=None if load_machine is None else loaders[load_machine],
    )
    await timer_for_a_gone_process(async_memory_scheduler, "r-9")

    await manual_clock.advance_async(timedelta(seconds=1))
    await manual_clock.advance_async(timedelta(hours=1))  # a dead letter now, not a retry loop

    assert calls == ([] if load_machine is None else ["r-9"])
    [dead] = await async_memory_scheduler.dead_letters()
    assert (dead.item.id, dead.attempts) == ("Request:r-9:requesting", 1)
    assert dead.error == f"Undeliverable: machine 'Request': model 'r-9' not found ({reason})"
    assert dead.dead_at == manual_clock.now() - timedelta(hours=1)
    assert not await async_memory_scheduler.exists("Request:r-9:requesting")


def test_a_sync_scheduler_gives_sync_listeners_an_async_one_async(
    scheduler: InMemoryScheduler,
) -> None:
    assert not StatechartTimers(scheduler, name="Request").is_async
    async_scheduler = AsyncInMemoryScheduler(clock=ManualClock())
    assert StatechartTimers(async_scheduler, name="Request").is_async
    with pytest.raises(TypeError, match="StatechartTimers: scheduler must be a flowsched"):
        StatechartTimers(object(), name="Request")
