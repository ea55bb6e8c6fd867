"""Timer ids that cannot collide, and copies of one model or machine told apart by identity
(CONTRACT section 12): found by a black-box review, each failed before its fix."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import mongomock
from statemachine import State, StateChart

from flowsched import InMemoryScheduler, ManualClock, MongoScheduler
from flowsched.integrations.statemachine import StatechartTimers, durable_timeout
from flowsched.integrations.transitions import DurableMachine

TIMED = ["idle", {"name": "waiting", "timeout": 10, "on_timeout": "expire"}, "expired"]


class Model:
    def __init__(self, model_id: str) -> None:
        self.id = model_id
        self.expired = 0

    def expire(self) -> None:
        self.expired += 1


def test_ids_with_separators_never_share_a_timer(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    # "A" + "x:1" and "A:x" + "1" both made "A:x:1:waiting": one timeout replaced the other.
    first, second = Model("x:1"), Model("1")
    DurableMachine(model=first, states=TIMED, initial="idle", scheduler=scheduler, name="A")
    DurableMachine(model=second, states=TIMED, initial="idle", scheduler=scheduler, name="A:x")
    first.to_waiting()  # type: ignore[attr-defined]
    second.to_waiting()  # type: ignore[attr-defined]
    assert scheduler.get("A:x%3A1:waiting") is not None
    assert scheduler.get("A%3Ax:1:waiting") is not None
    clock.advance(timedelta(seconds=11))
    assert (first.expired, second.expired) == (1, 1)


def test_a_positive_timeout_under_a_microsecond_still_fires(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    model = Model("m")
    states = ["idle", {"name": "waiting", "timeout": 1e-7, "on_timeout": "expire"}]
    DurableMachine(model=model, states=states, initial="idle", scheduler=scheduler, name="B")
    model.to_waiting()  # type: ignore[attr-defined]
    clock.advance(timedelta(milliseconds=1))
    assert model.expired == 1
    assert durable_timeout(1e-7).delta == timedelta(microseconds=1)


@dataclass
class Order:
    """Equal by id, as a dataclass (or a model equal by primary key) is."""

    id: str

    def expire(self) -> None:
        self.to_expired()  # type: ignore[attr-defined]
        STORED[self.id] = self.state  # type: ignore[attr-defined]


STORED: dict[str, str] = {}


def test_a_loaded_model_equal_to_the_one_held_is_bound_and_the_held_one_kept(
    clock: ManualClock,
) -> None:
    def load(model_id: str) -> Order:
        order = Order(model_id)
        order.state = STORED[model_id]  # type: ignore[attr-defined]
        return order

    items = mongomock.MongoClient().db.timers
    here = MongoScheduler(items, node_id="here", clock=clock)
    there = MongoScheduler(items, node_id="there", clock=clock)
    options: dict[str, Any] = {"states": TIMED, "initial": "idle", "name": "O", "load_model": load}
    held_machine = DurableMachine(model=None, scheduler=here, **options)
    other_machine = DurableMachine(model=None, scheduler=there, **options)
    held = Order("o-1")
    held_machine.add_model(held)
    STORED["o-1"] = "idle"
    moved = load("o-1")  # another process enters the timed state
    other_machine.add_model(moved, initial="idle")
    moved.to_waiting()  # type: ignore[attr-defined]
    STORED["o-1"] = "waiting"
    other_machine.remove_model(moved)
    here.start()
    try:
        clock.advance(timedelta(seconds=11))
    finally:
        here.close()
    assert STORED["o-1"] == "expired"
    assert here.dead_letters() == [] and here.get("O:o-1:waiting") is None
    assert any(model is held for model in held_machine.models)


class Request(StateChart):
    idle = State(initial=True)
    requesting = State(invoke=durable_timeout(30, on="expire"))
    timed_out = State(final=True)
    ask = idle.to(requesting)
    back = requesting.to(idle)
    expire = requesting.to(timed_out)


def test_a_new_copy_entering_again_arms_its_own_timeout(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    timers = StatechartTimers(scheduler, name="R")
    first = Request(listeners=[timers.listener("r-1")])
    first.send("ask")  # the copy held here waits in the state (its timer armed)
    clock.advance(timedelta(seconds=20))
    again = Request(start_value="idle", listeners=[timers.listener("r-1")])
    again.send("ask")  # the copy built from storage enters: its timeout starts now
    item = scheduler.get("R:r-1:requesting")
    assert item is not None and item.due == clock.now() + timedelta(seconds=30)
    clock.advance(timedelta(seconds=31))
    assert "timed_out" in again.configuration_values
