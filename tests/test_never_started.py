"""A scheduler that was never started is not silent.

On a real clock nothing fires before ``start()`` (or ``with``). A FlowDomain on such a
scheduler warns at its first timer; the scheduler itself warns once it holds an item due for
longer than its poll interval (``max_wait`` in memory, ``poll_interval`` on MongoDB). On a
ManualClock nothing needs starting (``advance``/``run_due`` deliver): no warning there.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import mongomock
import pytest

from flowsched import (
    Flow,
    FlowDomain,
    InMemoryScheduler,
    ManualClock,
    MongoScheduler,
    ScheduleItem,
    ScheduleKind,
    SchedulingConfig,
    SystemClock,
)

CONF = "Payment.CheckingFraud.CheckFraud.timeout-duration = 1s"
PAYMENT = Flow("Payment").initial("CheckingFraud", invokes="CheckFraud").terminal("Done")
SHORT = timedelta(milliseconds=100)


def domain_on(scheduler: Any, clock: Any = None) -> FlowDomain:
    builder = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_flow(PAYMENT)
        .with_action_adapter("CheckFraud", lambda request: None)
    )
    if clock is not None:
        builder.with_clock(clock)
    return builder.build()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def mongo(**options: Any) -> MongoScheduler:
    return MongoScheduler(mongomock.MongoClient(tz_aware=True)["db"]["timers"], **options)


@pytest.mark.parametrize("make", [InMemoryScheduler, mongo], ids=["memory", "mongo"])
def test_a_domain_on_a_scheduler_never_started_warns_once_at_its_first_timer(make, caplog):
    scheduler = make()
    domain = domain_on(scheduler)
    assert warnings(caplog) == []  # building is fine: the scheduler may be started later

    with caplog.at_level(logging.WARNING, logger="flowsched.flow"):
        domain.start("Payment", "p-1")
        domain.start("Payment", "p-2")

    found = [m for m in warnings(caplog) if m.startswith("FlowDomain:")]
    assert len(found) == 1, found
    assert f"its {type(scheduler).__name__} was never started" in found[0]
    assert "call scheduler.start()" in found[0]
    assert "ACTION_TIMEOUT" in found[0]
    scheduler.close()


@pytest.mark.parametrize("make", [InMemoryScheduler, mongo], ids=["memory", "mongo"])
def test_a_started_scheduler_gives_no_warning(make, caplog):
    with make() as scheduler, caplog.at_level(logging.WARNING):
        domain_on(scheduler).start("Payment", "p-1")

    assert warnings(caplog) == []


@pytest.mark.parametrize("make", [InMemoryScheduler, mongo], ids=["memory", "mongo"])
def test_on_a_manual_clock_nothing_needs_starting_and_nothing_warns(make, caplog):
    clock = ManualClock()
    scheduler = make(clock=clock)
    with caplog.at_level(logging.WARNING):
        domain_on(scheduler, clock).start("Payment", "p-1")
        clock.advance(timedelta(seconds=5))
        scheduler.run_due()

    assert not scheduler.needs_start
    assert warnings(caplog) == []
    scheduler.close()


def wait_for(condition: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def watch_threads(before: frozenset[threading.Thread] = frozenset()) -> list[threading.Thread]:
    """The start-watch threads alive now, but for those in ``before`` (other tests' watches
    of schedulers still alive)."""
    found = [t for t in threading.enumerate() if t.name.endswith("-start-watch")]
    return [t for t in found if t not in before]


@pytest.mark.parametrize(
    "make",
    [lambda: InMemoryScheduler(max_wait=SHORT), lambda: mongo(poll_interval=SHORT)],
    ids=["memory", "mongo"],
)
def test_a_scheduler_holding_due_items_while_never_started_warns_once(make, caplog):
    scheduler = make()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    assert scheduler.needs_start
    now = SystemClock().now()
    before = frozenset(watch_threads())

    with caplog.at_level(logging.WARNING, logger="flowsched.delivery"):
        scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, now))
        scheduler.schedule(ScheduleItem("t-2", ScheduleKind.TIMER, now))
        assert wait_for(lambda: warnings(caplog))
        assert wait_for(lambda: not watch_threads(before))  # the watch ends with its warning

    (message,) = warnings(caplog)
    name = type(scheduler).__name__
    assert message.startswith(f"{name} holds timers due since ")
    assert "was never started: nothing fires until you call start()" in message
    scheduler.close()


def test_the_watch_ends_when_the_scheduler_starts_and_never_warns(caplog):
    scheduler = InMemoryScheduler(max_wait=SHORT)
    due_later = SystemClock().now() + timedelta(hours=1)
    before = frozenset(watch_threads())

    with caplog.at_level(logging.WARNING):
        scheduler.schedule(ScheduleItem("later", ScheduleKind.TIMER, due_later))
        assert watch_threads(before)
        scheduler.start()
        assert wait_for(lambda: not watch_threads(before))
        scheduler.close()

    assert warnings(caplog) == []


def test_a_mongo_node_that_only_schedules_for_others_is_not_warned_about(caplog):
    producer = mongo(poll_interval=SHORT)  # no handlers: other nodes deliver

    with caplog.at_level(logging.WARNING):
        producer.schedule(ScheduleItem("t", ScheduleKind.TIMER, SystemClock().now()))
        time.sleep(SHORT.total_seconds() * 4)

    assert warnings(caplog) == []
    producer.close()


async def _start_two_on(scheduler: Any) -> None:
    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_flow(PAYMENT)
        .with_action_adapter("CheckFraud", lambda request: None)
        .build_async()
    )
    await domain.start("Payment", "p-1")
    await domain.start("Payment", "p-2")


def test_an_async_domain_on_an_async_scheduler_never_started_warns_once(caplog):
    import asyncio

    from flowsched import AsyncInMemoryScheduler

    scheduler = AsyncInMemoryScheduler()
    assert scheduler.needs_start
    with caplog.at_level(logging.WARNING, logger="flowsched.flow"):
        asyncio.run(_start_two_on(scheduler))

    (message,) = warnings(caplog)
    assert "AsyncInMemoryScheduler was never started" in message


def test_an_async_domain_on_a_started_or_manual_async_scheduler_does_not_warn(caplog):
    import asyncio

    from flowsched import AsyncInMemoryScheduler

    async def started() -> None:
        async with AsyncInMemoryScheduler() as scheduler:
            assert not scheduler.needs_start
            await _start_two_on(scheduler)

    with caplog.at_level(logging.WARNING, logger="flowsched.flow"):
        asyncio.run(started())
        manual = AsyncInMemoryScheduler(clock=ManualClock())
        assert not manual.needs_start
        asyncio.run(_start_two_on(manual))

    assert warnings(caplog) == []
