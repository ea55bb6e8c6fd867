"""``await clock.advance_async(...)`` keeps ``advance``'s promises on the asyncio face.

The scenario of ``test_virtual_time_parity`` (a flow with retries and a timeout next to a
failing plain timer with a follow-up), run on ``AsyncInMemoryScheduler`` and
``AsyncFlowDomain`` with ``async def`` adapters and handlers: its history - every action
call, state change, timer delivery and the ``clock.now()`` each saw - is the same as the
synchronous in-memory one's, however the 30 s are cut into steps (a property, tried on
random cuts).
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from test_virtual_time_parity import (
    CONF,
    ONE_BIG,
    ONE_SECOND_STEPS,
    PAYMENT,
    T0,
    History,
    memory,
    run_scenario,
)

from flowsched import (
    AsyncInMemoryScheduler,
    FlowDomain,
    ManualClock,
    ScheduleItem,
    ScheduleKind,
    SchedulingConfig,
)
from flowsched.flow import ActionRequest, TimelineEntry

S = timedelta(seconds=1)


async def run_async_scenario(steps: list[timedelta]) -> History:
    clock = ManualClock(T0)
    scheduler = AsyncInMemoryScheduler(clock=clock)
    history: History = []

    def seen(*what: object) -> None:
        history.append((clock.now().isoformat(), *map(str, what)))

    async def call(request: ActionRequest) -> None:
        await asyncio.sleep(0)
        seen("call", request.action, request.attempt)

    def record(entry: TimelineEntry) -> None:
        seen("timeline", entry.at.isoformat(), entry.what.value, entry.detail)

    failures = {"reminder": 2}

    async def timer(item: ScheduleItem, attempt: int) -> None:
        seen("timer", item.id, attempt, item.due.isoformat())
        if failures.get(item.id, 0) > attempt:
            raise RuntimeError(f"{item.id} fails")
        if item.id == "reminder":
            follow_up = ScheduleItem("follow-up", ScheduleKind.TIMER, clock.now() + 2 * S)
            await scheduler.schedule(follow_up)

    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_clock(clock)
        .with_flow(PAYMENT)
        .with_action_adapter("A", call)
        .with_action_adapter("B", call)
        .with_listener(record)
        .build_async()
    )
    scheduler.subscribe(ScheduleKind.TIMER, timer)
    async with scheduler:
        await domain.start("Payment", "p-1")
        await scheduler.schedule(ScheduleItem("reminder", ScheduleKind.TIMER, T0 + 2 * S))
        for step in steps:
            await clock.advance_async(step)
        assert clock.now() == T0 + sum(steps, timedelta(0))
        instance = await domain.instance("p-1")
        assert instance is not None
        seen("state", instance.state)
    return history


def test_the_async_face_gives_the_synchronous_history() -> None:
    reference = run_scenario(memory, ONE_SECOND_STEPS)
    assert asyncio.run(run_async_scenario(ONE_BIG)) == reference
    assert asyncio.run(run_async_scenario(ONE_SECOND_STEPS)) == reference
    assert reference[-1] == ("2026-01-01T00:00:30+00:00", "state", "TimedOut")


REFERENCE: list[History] = []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=30_000), max_size=12))
def test_one_big_advance_equals_any_cut_into_small_ones(cuts: list[int]) -> None:
    if not REFERENCE:
        REFERENCE.append(asyncio.run(run_async_scenario(ONE_BIG)))
    points = sorted({0, 30_000, *cuts})
    steps = [timedelta(milliseconds=b - a) for a, b in itertools.pairwise(points)]
    steps += [timedelta(0)]  # an empty step changes nothing either
    assert asyncio.run(run_async_scenario(steps)) == REFERENCE[0]
