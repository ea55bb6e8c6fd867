"""``AsyncFlowDomain``: the flow domain's decisions, applied with awaited port calls.

Action adapters may be ``async def`` (awaited on the loop) or plain (run in a worker
thread); a response they return is fed back as with the synchronous domain; timeouts and
retries come from the configuration; one instance is decided at a time."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import timedelta

import pytest

from flowsched import (
    ActionTimeoutEvent,
    AsyncFlowDomain,
    AsyncInMemoryScheduler,
    Flow,
    FlowDomain,
    ManualClock,
    ScheduleKind,
    SchedulingConfig,
)
from flowsched.flow import ActionRequest
from flowsched.testing import CLOCK_START

pytestmark = pytest.mark.asyncio
S = timedelta(seconds=1)


@dataclass(frozen=True)
class Checked:
    flow_id: str


FLOW = (
    Flow("Payment")
    .initial("Checking", invokes=["Check"])
    .state("Paying", invokes=["Pay"])
    .terminal("Done", "TimedOut")
    .response(Checked, to="Check")
    .on(Checked, in_state="Checking", go_to="Paying")
    .on(ActionTimeoutEvent, in_state="Paying", action="Pay", go_to="TimedOut")
)
CONF = """
Payment.Checking.Check { max-retries = 2, initial-retry-interval = 1s, jitter-enabled = false }
Payment.Paying.Pay.timeout-duration = 10s
"""


def build(
    scheduler: AsyncInMemoryScheduler, clock: ManualClock, check: object, pay: object
) -> AsyncFlowDomain:
    return (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_clock(clock)
        .with_flow(FLOW)
        .with_action_adapter("Check", check)  # type: ignore[arg-type]
        .with_action_adapter("Pay", pay)  # type: ignore[arg-type]
        .build_async()
    )


async def test_an_async_adapter_answers_and_the_timeout_fires(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    calls: list[str] = []

    async def check(request: ActionRequest) -> Checked:
        await asyncio.sleep(0)
        calls.append(request.action)
        return Checked(request.flow_id)

    async def pay(request: ActionRequest) -> None:
        calls.append(request.action)

    domain = build(async_memory_scheduler, manual_clock, check, pay)
    started = await domain.start("Payment", "p-1")
    assert started.state == "Checking"  # as decided; the response follows
    instance = await domain.instance("p-1")
    assert instance is not None and instance.state == "Paying"
    assert [t.kind for t in await domain.timers("p-1")] == [ScheduleKind.ACTION_TIMEOUT]
    await manual_clock.advance_async(10 * S)
    instance = await domain.instance("p-1")
    assert instance is not None and instance.state == "TimedOut"
    assert calls == ["Check", "Pay"]
    assert await domain.timers("p-1") == []


async def test_plain_adapters_run_off_the_loop_and_retries_apply(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    loop_thread = threading.get_ident()
    attempts: list[tuple[int, bool]] = []

    def check(request: ActionRequest) -> None:
        attempts.append((request.attempt, threading.get_ident() != loop_thread))
        if request.attempt < 3:
            raise ConnectionError("fraud service down")

    domain = build(async_memory_scheduler, manual_clock, check, lambda request: None)
    await domain.start("Payment", "p-1")
    await manual_clock.advance_async(5 * S)
    assert attempts == [(1, True), (2, True), (3, True)]
    await domain.handle("p-1", Checked("p-1"))
    instance = await domain.instance("p-1")
    assert instance is not None and instance.state == "Paying"


async def test_one_instance_is_decided_at_a_time(
    async_memory_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    async def check(request: ActionRequest) -> None:
        return None

    domain = build(async_memory_scheduler, manual_clock, check, check)
    await domain.start("Payment", "p-1")
    results = await asyncio.gather(*(domain.handle("p-1", Checked("p-1")) for _ in range(5)))
    states = sorted(r.state for r in results)
    assert states == ["Paying"] * 5  # the first moves it on, the rest find nothing to do
    instance = await domain.instance("p-1")
    assert instance is not None and instance.version == 2


async def test_the_async_scheduler_fixture_serves_async_tests(
    async_scheduler: AsyncInMemoryScheduler, manual_clock: ManualClock
) -> None:
    seen: list[str] = []

    async def handler(item: object, attempt: int) -> None:
        seen.append(manual_clock.now().isoformat())

    async_scheduler.register("reminder", handler)
    await async_scheduler.create_single_timer("r-1", timedelta(minutes=5), "reminder")
    await manual_clock.advance_async(timedelta(hours=1))
    assert seen == [(CLOCK_START + timedelta(minutes=5)).isoformat()]
