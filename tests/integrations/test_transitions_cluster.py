"""DurableMachine in a cluster, and the inputs it refuses: a node holding an out-of-date copy
of a model does not drop a current timeout; an id clash adds nothing; a bad timeout names its
state."""

from __future__ import annotations

from datetime import timedelta

import mongomock
import pytest

pytest.importorskip("transitions")

from flowsched import InMemoryScheduler, ManualClock, MongoScheduler
from flowsched.integrations.statemachine import durable_timeout
from flowsched.integrations.transitions import DurableMachine

STATES = ["new", {"name": "waiting", "timeout": 30, "on_timeout": "expire"}, "expired"]


class Order:
    def __init__(self, order_id: str, state: str | None = None) -> None:
        self.id = order_id
        self.expired = 0
        if state is not None:
            self.state = state

    def expire(self) -> None:
        self.expired += 1


def machine(scheduler: MongoScheduler, **options: object) -> DurableMachine:
    return DurableMachine(
        model=None, states=STATES, initial="new", scheduler=scheduler, name="Orders", **options
    )


def two_nodes(clock: ManualClock) -> tuple[MongoScheduler, MongoScheduler]:
    collection = mongomock.MongoClient(tz_aware=True)["fs"]["timers"]
    return (
        MongoScheduler(collection, node_id="A", clock=clock),
        MongoScheduler(collection, node_id="B", clock=clock),
    )


def test_a_timeout_entered_again_on_another_node_fires_on_a_node_holding_the_old_entry(
    clock: ManualClock,
) -> None:
    """B entered "waiting"; 10 s later A entered it again (the timer replaced, a new entry).
    The timer reaches B, whose copy is in "waiting" with the old entry: it was dropped."""
    node_a, node_b = two_nodes(clock)
    on_b, on_a = machine(node_b), machine(node_a)
    copy_b = Order("o-1")
    on_b.add_model(copy_b)
    copy_b.to_waiting()
    clock.advance(timedelta(seconds=10))
    copy_a = Order("o-1", "waiting")
    on_a.add_model(copy_a, initial="waiting")
    copy_a.to_waiting()
    with node_b:
        clock.advance(timedelta(seconds=31))
    assert copy_b.expired + copy_a.expired == 1


def test_a_node_whose_copy_moved_on_elsewhere_asks_load_model(clock: ManualClock) -> None:
    """B's copy is still "new" (B built it), A moved it to "waiting": with load_model, B
    fires the timeout on the stored model, not on its own out-of-date copy."""
    node_a, node_b = two_nodes(clock)
    stored: dict[str, Order] = {}
    on_b = machine(node_b, load_model=stored.get)
    on_a = machine(node_a)
    copy_b = Order("o-2")
    on_b.add_model(copy_b)
    copy_a = Order("o-2", "new")
    on_a.add_model(copy_a, initial="new")
    copy_a.to_waiting()
    stored["o-2"] = Order("o-2", "waiting")
    with node_b:
        clock.advance(timedelta(seconds=31))
    assert stored["o-2"].expired == 1 and copy_b.expired == 0
    assert copy_b.state == "new" and copy_b in on_b.models  # its own copy is left alone
    assert stored["o-2"] not in on_b.models  # borrowed for the delivery only


def test_a_model_refused_for_its_id_is_not_added(
    clock: ManualClock, scheduler: InMemoryScheduler
) -> None:
    orders = DurableMachine(
        model=None, states=STATES, initial="new", scheduler=scheduler, name="Dup"
    )
    first, second = Order("same"), Order("same")
    orders.add_model(first)
    with pytest.raises(ValueError, match="already has a model with id 'same'"):
        orders.add_model(second)
    assert second not in orders.models and not hasattr(second, "to_waiting")
    with pytest.raises(ValueError, match="already has a model with id 'twice'"):
        orders.add_model([Order("twice"), Order("twice")])
    assert [m.id for m in orders.models] == ["same"]
    first.to_waiting()
    clock.advance(timedelta(seconds=31))
    assert first.expired == 1


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        ("abc", "state 'slow' timeout"),
        (-1, "state 'slow' timeout: timeout cannot be negative"),
        (10**20, "state 'slow' timeout: timeout of .* is over .*1,000 years"),
        (1e300, "state 'slow' timeout: timeout of .* is over .*1,000 years"),
        ("999999999 d", "state 'slow' timeout: timeout of .* is over .*1,000 years"),
    ],
)
def test_a_bad_timeout_is_refused_when_the_state_is_built_naming_it(
    scheduler: InMemoryScheduler, timeout: object, message: str
) -> None:
    states = ["new", {"name": "slow", "timeout": timeout, "on_timeout": "expire"}]
    with pytest.raises(ValueError, match=message):  # ConfigError is a ValueError too
        DurableMachine(states=states, initial="new", scheduler=scheduler, name="Bad")


@pytest.mark.parametrize("duration", [10**20, 1e300, "999999999 d"])
def test_a_durable_timeout_too_long_to_schedule_is_a_value_error(duration: object) -> None:
    with pytest.raises(ValueError, match="1,000 years"):
        durable_timeout(duration)  # type: ignore[arg-type]
