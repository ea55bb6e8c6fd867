"""Each flow's timers are addressed to that flow (``flow:<Flow>``): several domains with
different flows share one scheduler or one collection, and each fires only its own."""

from __future__ import annotations

from datetime import timedelta

import mongomock
import pytest
from flowkit import T0, S

from flowsched import InMemoryScheduler, ManualClock, MongoScheduler, SchedulingConfig
from flowsched.flow import ActionTimeoutEvent, Flow, FlowDomain
from flowsched.mongo.flow_store import MongoFlowStore
from flowsched.port import ScheduleKind, SchedulerPort

CONF = "Any.Waiting.Ask.timeout-duration = 5s"


def waiting_flow(name: str) -> Flow:
    """Waiting (invokes Ask, no answer ever) --5 s action timeout--> TimedOut."""
    return (
        Flow(name)
        .initial("Waiting", invokes="Ask")
        .terminal("TimedOut")
        .on(ActionTimeoutEvent, in_state="Waiting", action="Ask", go_to="TimedOut")
    )


def domain(scheduler: SchedulerPort, clock: ManualClock, *flows: str, store=None) -> FlowDomain:
    builder = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_clock(clock)
        .with_action_adapter("Ask", lambda request: None)
    )
    if store is not None:
        builder = builder.with_flow_store(store)
    for name in flows:
        builder = builder.with_flow(waiting_flow(name))
    return builder.build()


def test_two_domains_with_different_flows_share_one_scheduler() -> None:
    clock = ManualClock(T0)
    scheduler = InMemoryScheduler(clock=clock)
    a, b = domain(scheduler, clock, "FA"), domain(scheduler, clock, "FB")
    a.start("FA", "a-1")
    b.start("FB", "b-1")
    [timer] = a.timers("a-1")
    assert (timer.kind, timer.handler) == (ScheduleKind.ACTION_TIMEOUT, "flow:FA")

    clock.advance(5 * S)

    assert a.instance("a-1").state == "TimedOut"  # type: ignore[union-attr]
    assert b.instance("b-1").state == "TimedOut"  # type: ignore[union-attr]


def test_a_second_domain_for_the_same_flow_on_one_scheduler_is_refused() -> None:
    clock = ManualClock(T0)
    scheduler = InMemoryScheduler(clock=clock)
    domain(scheduler, clock, "FA")
    with pytest.raises(ValueError, match="flow 'FA' already runs in another FlowDomain"):
        domain(scheduler, clock, "FA")


def test_a_kind_subscription_after_the_domain_does_not_take_its_timeouts() -> None:
    clock = ManualClock(T0)
    scheduler = InMemoryScheduler(clock=clock)
    flows = domain(scheduler, clock, "FA")
    alerts: list[str] = []
    scheduler.subscribe(ScheduleKind.ACTION_TIMEOUT, lambda item, attempt: alerts.append(item.id))
    flows.start("FA", "a-1")

    clock.advance(5 * S)

    assert flows.instance("a-1").state == "TimedOut"  # type: ignore[union-attr]
    assert alerts == []


def test_nodes_on_one_collection_fire_only_the_flows_they_run() -> None:
    """A rolling deployment: node A runs FA, node B runs FB, one timers collection and one
    instance store. Whichever node sweeps first, nothing is lost or misdelivered."""
    clock = ManualClock(T0)
    database = mongomock.MongoClient()["db"]
    store = MongoFlowStore(database["instances"])
    node_a = MongoScheduler(database["timers"], node_id="A", clock=clock)
    node_b = MongoScheduler(database["timers"], node_id="B", clock=clock)
    a = domain(node_a, clock, "FA", store=store)
    b = domain(node_b, clock, "FB", store=store)
    for n in range(3):
        a.start("FA", f"a-{n}")
        b.start("FB", f"b-{n}")
    clock.advance(timedelta(seconds=5))

    assert node_b.run_due() == 3  # B sweeps first: only FB's timers
    assert [a.instance(f"a-{n}").state for n in range(3)] == ["Waiting"] * 3  # type: ignore[union-attr]
    assert [node_a.exists(t.id) for n in range(3) for t in a.timers(f"a-{n}")] == [True] * 3
    assert node_a.run_due() == 3
    states = [d.instance(f"{p}-{n}").state for d, p in ((a, "a"), (b, "b")) for n in range(3)]  # type: ignore[union-attr]
    assert states == ["TimedOut"] * 6
    assert node_a.dead_letters() == [] and database["timers"].count_documents({}) == 0
