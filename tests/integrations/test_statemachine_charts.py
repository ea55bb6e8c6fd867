"""python-statemachine's timeout, as upstream, in the places a flat machine does not reach:
states nested in compound and parallel states, several timeouts in one state, internal
transitions, the ``done.invoke`` event's ``data``, machines that finish, and a cluster whose
nodes hold out-of-date copies of a machine."""

from __future__ import annotations

import gc
import weakref
from datetime import timedelta
from typing import Any

import mongomock
import pytest

pytest.importorskip("statemachine")

from statemachine import State, StateChart

from flowsched import InMemoryScheduler, ManualClock, MongoScheduler
from flowsched.integrations.statemachine import StatechartTimers, durable_timeout


def tick(clock: ManualClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.advance(timedelta(seconds=1))


class Nested(StateChart):
    class busy(State.Compound):
        step = State(initial=True, invoke=durable_timeout(10, on="slow"))
        stuck = State()
        slow = step.to(stuck)

    idle = State(final=True)
    stop = busy.to(idle)


def test_a_timeout_in_a_compound_state_fires_and_leaving_the_parent_cancels_it(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    timers = StatechartTimers(scheduler, name="Nested")
    fired = Nested(listeners=[timers.listener("n-1")])
    tick(clock, 11)
    assert "stuck" in fired.configuration_values  # was a dead letter: "has no state 'step'"
    assert scheduler.dead_letters() == []
    left = Nested(listeners=[timers.listener("n-2")])
    assert scheduler.exists("Nested:n-2:step")
    left.send("stop")
    assert not scheduler.exists("Nested:n-2:step")
    assert {"busy", "step", "stuck", "idle"} <= set(timers.as_flow(Nested).build().states)


class Regions(StateChart):
    class both(State.Parallel):
        class left(State.Compound):
            a = State(initial=True, invoke=durable_timeout(5, on="left_late"))
            a_late = State()
            left_late = a.to(a_late)

        class right(State.Compound):
            b = State(initial=True, invoke=durable_timeout(7, on="right_late"))
            b_late = State()
            right_late = b.to(b_late)


def test_timeouts_in_parallel_regions_each_fire(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    machine = Regions(listeners=[StatechartTimers(scheduler, name="Regions").listener("r")])
    tick(clock, 6)
    assert {"a_late", "b"} <= machine.configuration_values
    tick(clock, 2)
    assert {"a_late", "b_late"} <= machine.configuration_values


def test_two_timeouts_in_one_state_warn_then_fail_as_upstream(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    """Upstream (``timeout(0.05, on="warn"), timeout(0.2, on="fail")`` and an internal
    ``warn``): warned at 0.05, 0.1, 0.15, then failed at 0.2 - the internal transition
    restarts the timeout that fired, not the one still waiting. Only the first was armed."""
    warned: list[int] = []

    class Escalating(StateChart):
        waiting = State(
            initial=True, invoke=[durable_timeout(5, on="warn"), durable_timeout(20, on="fail")]
        )
        failed = State(final=True)
        warn = waiting.to.itself(internal=True, on=lambda: warned.append(1))
        fail = waiting.to(failed)

    machine = Escalating(listeners=[StatechartTimers(scheduler, name="Esc").listener("e")])
    assert scheduler.exists("Esc:e:waiting") and scheduler.exists("Esc:e:waiting#2")
    tick(clock, 30)
    assert warned == [1, 1, 1]
    assert "failed" in machine.configuration_values
    assert not scheduler.exists("Esc:e:waiting") and not scheduler.exists("Esc:e:waiting#2")


def test_an_external_self_transition_on_the_timeout_polls(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    ticks: list[int] = []

    class Poller(StateChart):
        polling = State(initial=True, invoke=durable_timeout(1, on="poll"))
        poll = polling.to.itself(on=lambda: ticks.append(1))

    Poller(listeners=[StatechartTimers(scheduler, name="Poller").listener("p")])
    clock.advance(timedelta(milliseconds=5500))  # one step fires each re-armed timer in it
    assert len(ticks) == 5


def test_done_invoke_carries_data_none_as_upstream(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    seen: list[Any] = []

    class Waits(StateChart):
        waiting = State(initial=True, invoke=durable_timeout(1))
        done = State(final=True)
        done_invoke_waiting = waiting.to(done, on=lambda data: seen.append(data))

    machine = Waits(listeners=[StatechartTimers(scheduler, name="Waits").listener("w")])
    tick(clock, 2)
    assert "done" in machine.configuration_values
    assert seen == [None]  # the callback taking data= was skipped


def test_a_finished_machine_is_not_held_but_a_waiting_one_is(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    class Job(StateChart):
        running = State(initial=True, invoke=durable_timeout(30, on="expire"))
        finished = State(final=True)
        expired = State(final=True)
        finish = running.to(finished)
        expire = running.to(expired)

    timers = StatechartTimers(scheduler, name="Job")
    finished = [Job(listeners=[timers.listener(f"j-{n}")]) for n in range(50)]
    for machine in finished:
        machine.send("finish")
    refs = [weakref.ref(machine) for machine in finished]
    del finished, machine
    waiting = weakref.ref(Job(listeners=[timers.listener("j-waiting")]))
    gc.collect()
    assert sum(ref() is not None for ref in refs) == 0  # all 50 were kept for ever
    alive = waiting()
    assert alive is not None  # its timer still waits: kept, as upstream's thread keeps it
    tick(clock, 31)
    assert "expired" in alive.configuration_values


class Record:
    def __init__(self, state: str | None = None) -> None:
        self.state = state


class Request(StateChart):
    waiting = State(initial=True, invoke=durable_timeout(30, on="expire"))
    review = State(invoke=durable_timeout(60, on="escalate"))
    expired = State(final=True)
    escalated = State(final=True)
    submit = waiting.to(review)
    expire = waiting.to(expired)
    escalate = review.to(escalated)


def test_a_node_with_an_out_of_date_copy_asks_load_machine(clock: ManualClock) -> None:
    """Node B built r-1 (and holds it, its timer armed); node A moved it on to review. The
    review timeout reaches B, whose copy says "waiting": it was completed unsent."""
    collection = mongomock.MongoClient(tz_aware=True)["fs"]["timers"]
    store: dict[str, str] = {}
    loaded: list[Request] = []

    def load(machine_id: str) -> Request:
        machine = Request(model=Record(store[machine_id]), listeners=[on_b.listener(machine_id)])
        loaded.append(machine)
        return machine

    node_a = MongoScheduler(collection, node_id="A", clock=clock)
    node_b = MongoScheduler(collection, node_id="B", clock=clock)
    on_b = StatechartTimers(node_b, name="Request", load_machine=load)
    on_a = StatechartTimers(node_a, name="Request")
    record_b = Record()
    stale = Request(model=record_b, listeners=[on_b.listener("r-1")])
    store["r-1"] = record_b.state
    record_a = Record(store["r-1"])
    Request(model=record_a, listeners=[on_a.listener("r-1")]).send("submit")
    store["r-1"] = record_a.state
    with node_b:
        tick(clock, 61)
    assert "waiting" in stale.configuration_values  # B's own copy, left as it was
    assert loaded and "escalated" in loaded[-1].configuration_values
    assert not node_b.exists("Request:r-1:review")
