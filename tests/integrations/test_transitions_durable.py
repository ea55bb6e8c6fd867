"""What DurableMachine adds to transitions' Timeout: timers through the port, addressed to the
machine's handler, tuned in config, stale timers ignored, models found in another process,
missing models dead-lettered (CONTRACT section 12)."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from typing import Any

import mongomock
import pytest
from transitions.extensions import HierarchicalMachine

from flowsched import InMemoryScheduler, ManualClock, MongoScheduler, SchedulingConfig
from flowsched.integrations.transitions import (
    AsyncDurableMachine,
    DurableMachine,
    DurableTimeout,
)


class Order:
    def __init__(self, order_id: str, state: str = "new") -> None:
        self.id = order_id
        self.state = state
        self.expired = 0

    def expire(self) -> None:
        self.expired += 1


STATES = ["new", {"name": "waiting", "timeout": "30s", "on_timeout": "expire"}, "paid"]


def machine_for(scheduler: Any, *models: Any, **options: Any) -> DurableMachine:
    return DurableMachine(
        model=list(models) or None,
        states=STATES,
        initial="new",
        scheduler=scheduler,
        name="Orders",
        **options,
    )


def test_entering_arms_a_timer_addressed_to_the_machine(scheduler: InMemoryScheduler) -> None:
    order = Order("o-1")
    machine_for(scheduler, order)
    order.to_waiting()  # type: ignore[attr-defined]
    item = scheduler.get("Orders:o-1:waiting")
    assert item is not None and item.handler == "Orders"
    assert item.due == scheduler.now() + timedelta(seconds=30)
    assert set(item.payload or {}) == {"model", "state", "entry"}
    assert (item.payload or {})["model"] == "o-1"


def test_leaving_cancels_and_the_timeout_fires_once(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    left, stays = Order("o-1"), Order("o-2")
    machine_for(scheduler, left, stays)
    left.to_waiting()  # type: ignore[attr-defined]
    stays.to_waiting()  # type: ignore[attr-defined]
    left.to_paid()  # type: ignore[attr-defined]
    assert not scheduler.exists("Orders:o-1:waiting")
    clock.advance(timedelta(minutes=5))
    assert (left.expired, stays.expired) == (0, 1)


def test_a_stale_delivery_of_an_earlier_entry_does_nothing(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    order = Order("o-1")
    machine = machine_for(scheduler, order)
    order.to_waiting()  # type: ignore[attr-defined]
    first = scheduler.get("Orders:o-1:waiting")
    order.to_paid()  # type: ignore[attr-defined]
    order.to_waiting()  # type: ignore[attr-defined]  # left and came back: a new entry
    assert first is not None
    machine._on_timer(first, 0)  # a delivery of the old entry that was already running
    assert order.expired == 0
    clock.advance(timedelta(seconds=30))
    assert order.expired == 1


def test_config_overrides_the_code_with_any_precedence(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    config = SchedulingConfig.from_string(
        "Any.Any.Any.timeout-duration = 1h\nOrders.waiting.Any.timeout-duration = 2m"
    )
    order = Order("o-1")
    machine_for(scheduler, order, config=config)
    order.to_waiting()  # type: ignore[attr-defined]
    item = scheduler.get("Orders:o-1:waiting")
    assert item is not None and item.due == clock.now() + timedelta(minutes=2)
    order.to_paid()  # type: ignore[attr-defined]
    # a state without a timeout in code is not given one by Any.Any.Any
    assert scheduler.pending() == 0


def test_a_zero_timeout_in_config_means_no_timeout_as_in_code(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    """``timeout: 0`` is no timeout in transitions; ``timeout-duration = 0s`` in the config
    fired it at once."""
    config = SchedulingConfig.from_string("Orders.waiting.Any.timeout-duration = 0s")
    order = Order("o-1")
    machine_for(scheduler, order, config=config)
    order.to_waiting()  # type: ignore[attr-defined]
    assert not scheduler.exists("Orders:o-1:waiting")
    clock.advance(timedelta(hours=1))
    assert order.state == "waiting" and order.expired == 0


def test_timeout_as_seconds_or_hocon_duration(scheduler: InMemoryScheduler) -> None:
    assert DurableTimeout("s", timeout=1.5, on_timeout="x").timeout_delta == timedelta(seconds=1.5)
    assert DurableTimeout("s", timeout="2 minutes", on_timeout="x").timeout_delta == timedelta(
        minutes=2
    )
    with pytest.raises(ValueError, match="negative"):
        DurableTimeout("s", timeout=-1, on_timeout="x")


def test_a_model_not_found_is_a_dead_letter_not_a_loop(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    gone = Order("o-9")
    machine_for(scheduler, gone)
    gone.to_waiting()  # type: ignore[attr-defined]
    item = scheduler.get("Orders:o-9:waiting")
    assert item is not None
    # A new process: the same timer, a machine that cannot find the model.
    other = InMemoryScheduler(clock=clock)
    other.schedule(item)
    machine_for(other, load_model=lambda model_id: None)
    clock.advance(timedelta(minutes=30))
    [dead] = other.dead_letters()
    assert dead.attempts == 1
    assert "model 'o-9' not found" in dead.error
    assert not other.exists(item.id)


def test_load_model_raising_lookup_error_is_a_dead_letter_too(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    machine_for(scheduler, load_model={}.__getitem__)
    scheduler.create_single_timer(
        "Orders:o-7:waiting",
        timedelta(seconds=1),
        "Orders",
        {"model": "o-7", "state": "waiting", "entry": "x.1"},
    )
    clock.advance(timedelta(seconds=1))
    assert "not found" in scheduler.dead_letters()[0].error


def test_timeouts_armed_by_one_process_fire_in_the_next(clock: ManualClock) -> None:
    collection = mongomock.MongoClient()["flowsched"]["timers"]
    store: dict[str, str] = {}  # the application's own model store: id -> state
    old = MongoScheduler(collection, node_id="old", clock=clock)
    waiting, left = Order("o-1"), Order("o-2")
    machine_for(old, waiting, left)
    waiting.to_waiting()  # type: ignore[attr-defined]
    left.to_waiting()  # type: ignore[attr-defined]
    left.to_paid()  # type: ignore[attr-defined]
    store.update({o.id: o.state for o in (waiting, left)})
    old.close()

    fired: list[str] = []

    def load(model_id: str) -> Order:
        order = Order(model_id, store[model_id])
        order.expire = lambda: fired.append(model_id)  # type: ignore[method-assign]
        return order

    with MongoScheduler(collection, node_id="new", clock=clock) as new:
        machine_for(new, load_model=load)
        clock.advance(timedelta(seconds=29))
        assert fired == []
        clock.advance(timedelta(seconds=1))
        assert fired == ["o-1"]
        clock.advance(timedelta(minutes=10))
        assert fired == ["o-1"]


def test_on_timeout_errors_are_redelivered_unless_on_exception(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    calls: list[int] = []

    class Flaky(Order):
        def expire(self) -> None:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("flaky")

    order = Flaky("o-1")
    machine_for(scheduler, order)
    order.to_waiting()  # type: ignore[attr-defined]
    clock.advance(timedelta(seconds=30))
    assert len(calls) == 1 and scheduler.exists("Orders:o-1:waiting")
    clock.advance(timedelta(seconds=3))  # the scheduler's redelivery backoff
    assert len(calls) == 2 and not scheduler.exists("Orders:o-1:waiting")


def test_send_event_gives_one_event_data(clock: ManualClock, scheduler: InMemoryScheduler) -> None:
    seen: list[Any] = []
    states = ["A", {"name": "B", "timeout": 1, "on_timeout": seen.append}]
    machine = DurableMachine(
        states=states, initial="A", send_event=True, scheduler=scheduler, name="events"
    )
    machine.to_B()  # type: ignore[attr-defined]
    clock.advance(timedelta(seconds=1))
    [event_data] = seen
    assert event_data.event.name == "timeout" and event_data.state.name == "B"
    assert event_data.args == () and event_data.kwargs == {}


def test_refusals_name_the_problem(scheduler: InMemoryScheduler) -> None:
    class NoId:
        pass

    with pytest.raises(ValueError, match="stable id"):
        DurableMachine(model=NoId(), states=STATES, initial="new", scheduler=scheduler, name="X")
    machine_for(scheduler)
    with pytest.raises(ValueError, match="'Orders'"):
        machine_for(scheduler)
    with pytest.raises(TypeError, match="AsyncDurableMachine"):
        AsyncDurableMachine(states=STATES, initial="new", scheduler=scheduler, name="Y")

    class Nested(DurableMachine, HierarchicalMachine):  # type: ignore[misc]
        pass

    with pytest.raises(TypeError, match="nested states"):
        Nested(states=STATES, initial="new", scheduler=scheduler, name="Z")


def test_importing_flowsched_imports_neither_library() -> None:
    code = (
        "import sys, flowsched; print('transitions' in sys.modules, 'statemachine' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_durable_timeout_on_a_machine_without_a_scheduler_says_so() -> None:
    from transitions import Machine
    from transitions.extensions.states import add_state_features

    @add_state_features(DurableTimeout)
    class Unbound(Machine):
        pass

    machine = Unbound(states=STATES, initial="new")
    with pytest.raises(TypeError, match="DurableMachine"):
        machine.to_waiting()  # type: ignore[attr-defined]
