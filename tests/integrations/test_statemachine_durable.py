"""What StatechartTimers adds to python-statemachine's timeout: timers through the port,
tuned in config, found again in another process, missing machines dead-lettered."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import mongomock
import pytest

pytest.importorskip("statemachine")

from statemachine import State, StateChart

from flowsched import (
    InMemoryScheduler,
    ManualClock,
    MongoScheduler,
    SchedulingConfig,
)
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


def test_entering_arms_and_leaving_cancels(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    timers = StatechartTimers(scheduler, name="Request")
    first = Request(listeners=[timers.listener("r-1")])
    second = Request(listeners=[timers.listener("r-2")])
    item = scheduler.get("Request:r-1:requesting")
    assert item is not None and item.handler == "Request"
    assert item.due == clock.now() + timedelta(seconds=30)
    first.send("answer")
    assert not scheduler.exists("Request:r-1:requesting")
    clock.advance(timedelta(seconds=30))
    assert "answered" in first.configuration_values
    assert "timed_out" in second.configuration_values


def test_config_overrides_the_duration(clock: ManualClock, scheduler: InMemoryScheduler) -> None:
    config = SchedulingConfig.from_string("Request.Any.Any.timeout-duration = 5m")
    timers = StatechartTimers(scheduler, name="Request", config=config)
    Request(listeners=[timers.listener("r-1")])
    item = scheduler.get("Request:r-1:requesting")
    assert item is not None and item.due == clock.now() + timedelta(minutes=5)


def test_a_machine_restored_in_another_process_gets_its_timeout(clock: ManualClock) -> None:
    collection = mongomock.MongoClient()["flowsched"]["timers"]
    old = MongoScheduler(collection, node_id="old", clock=clock)
    old_timers = StatechartTimers(old, name="Request")
    records = {"r-1": Record(), "r-2": Record()}
    Request(model=records["r-1"], listeners=[old_timers.listener("r-1")])
    Request(model=records["r-2"], listeners=[old_timers.listener("r-2")]).send("answer")
    old.close()
    assert records["r-1"].state == "requesting" and records["r-2"].state == "answered"

    with MongoScheduler(collection, node_id="new", clock=clock) as new:
        timers = StatechartTimers(
            new,
            name="Request",
            load_machine=lambda machine_id: Request(
                model=records[machine_id], listeners=[timers.listener(machine_id)]
            ),
        )
        clock.advance(timedelta(seconds=30))
        assert records["r-1"].state == "timed_out"
        assert records["r-2"].state == "answered"
        assert collection.count_documents({}) == 0


def test_a_machine_not_found_is_a_dead_letter(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    timers = StatechartTimers(scheduler, name="Request", load_machine={}.__getitem__)
    scheduler.create_single_timer(
        "Request:r-9:requesting",
        timedelta(seconds=1),
        "Request",
        {"model": "r-9", "state": "requesting", "entry": "x.1"},
    )
    clock.advance(timedelta(seconds=1))
    [dead] = scheduler.dead_letters()
    assert "model 'r-9' not found" in dead.error
    assert timers.name == "Request"


def test_a_stale_delivery_sends_nothing(clock: ManualClock, scheduler: InMemoryScheduler) -> None:
    class Loop(StateChart):
        waiting = State(initial=True, invoke=durable_timeout(10, on="expired"))
        elsewhere = State()
        gone = State(final=True)
        leave = waiting.to(elsewhere)
        back = elsewhere.to(waiting)
        expired = waiting.to(gone)

    timers = StatechartTimers(scheduler, name="Loop")
    machine = Loop(listeners=[timers.listener("l-1")])
    first = scheduler.get("Loop:l-1:waiting")
    machine.send("leave")
    machine.send("back")
    assert first is not None
    timers._on_timer(first, 0)  # the old entry's delivery, already running
    assert "waiting" in machine.configuration_values
    clock.advance(timedelta(seconds=10))
    assert "gone" in machine.configuration_values


def test_without_a_listener_the_machine_gets_an_error_execution() -> None:
    errors: list[Any] = []

    class Unbound(StateChart):
        waiting = State(initial=True, invoke=durable_timeout(1))
        failed = State(final=True)
        error_execution = waiting.to(failed, on="record")

        def record(self, error: Any = None, **kwargs: Any) -> None:
            errors.append(error)

    machine = Unbound()
    for _ in range(200):  # the invoke thread reports it
        if errors:
            break
        time.sleep(0.01)
    assert "failed" in machine.configuration_values
    assert "no StatechartTimers listener" in str(errors[0])
