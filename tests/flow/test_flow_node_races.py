"""Two nodes sharing one flow store and one timer store never lose each other's timers.

A decision taken on an older state entry (it lost a race to another node) only writes timers
of that older entry: timer ids carry the entry number, so it cannot replace the winner's.
A timer that arrives before the decision that scheduled it is stored is redelivered a few
times rather than dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import mongomock
from flowkit import T0, HarnessFactory, M, S

from flowsched import ManualClock, MongoScheduler, SchedulingConfig
from flowsched.flow import (
    ActionRequest,
    Flow,
    FlowDomain,
    FlowInstance,
    InMemoryFlowStore,
    ProcessingTimeElapsedEvent,
)
from flowsched.flow.timers import ActionTimer, action_timer_id
from flowsched.port import ScheduleKind, SchedulerPort

CONF = """
F.S.A.max-retries = 3
F.S.A.initial-retry-interval = 1s
F.S.A.backoff-type = LINEAR
F.S.A.jitter-enabled = false
"""


@dataclass(frozen=True)
class Again:
    """Enter S once more."""


def _flow() -> Flow:
    return Flow("F").initial("S", invokes="A").terminal("Done").on(Again, in_state="S", go_to="S")


class InterleavingStore(InMemoryFlowStore):
    """Right after a load, lets another node change the instance first (once per entry in
    ``after_load``): the loader then decides on what is already an old entry."""

    def __init__(self) -> None:
        super().__init__()
        self.after_load: list[Callable[[], object]] = []

    def load(self, flow_id: str) -> FlowInstance | None:
        instance = super().load(flow_id)
        if self.after_load:
            self.after_load.pop()()
        return instance


def _node(
    scheduler: SchedulerPort,
    store: InMemoryFlowStore,
    clock: ManualClock,
    calls: list[tuple[int, int, datetime]],
) -> FlowDomain:
    def invoke(request: ActionRequest) -> None:
        instance = store.load(request.flow_id)
        assert instance is not None
        calls.append((instance.entry, request.attempt, clock.now()))

    return (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_flow_store(store)
        .with_clock(clock)
        .with_flow(_flow())
        .with_action_adapter("A", invoke)
        .build()
    )


def test_a_retry_decided_on_an_old_entry_does_not_replace_the_new_entrys_retry(
    clock: ManualClock,
) -> None:
    # Two nodes on one collection; only the loser's scheduler sweeps, so every timer fires
    # in the loser's domain.
    timers = mongomock.MongoClient()["db"]["timers"]
    scheduler = MongoScheduler(timers, node_id="winner", clock=clock)
    sweeper = MongoScheduler(timers, node_id="loser", clock=clock)
    store = InterleavingStore()
    calls: list[tuple[int, int, datetime]] = []
    winner = _node(scheduler, store, clock, calls)
    _node(sweeper, store, clock, calls)  # the loser: it runs the timers
    winner.start("F", "f1")
    # The first retry (entry 1) fires on the loser; right after it loads the instance, the
    # winner re-enters S (entry 2, a fresh retry schedule from 1 s).
    store.after_load.append(lambda: winner.handle("f1", Again()))

    clock.advance(1 * S)
    sweeper.run_due()
    try:
        retry_of_entry_2 = scheduler.get(
            action_timer_id("f1", "S", 2, "A", ScheduleKind.ACTION_RETRY)
        )
        assert retry_of_entry_2 is not None and retry_of_entry_2.payload is not None
        assert retry_of_entry_2.payload["entry"] == 2 and retry_of_entry_2.due == T0 + 2 * S
        for _ in range(10):  # one second at a time: each retry is seen at its own time
            clock.advance(1 * S)
            sweeper.run_due()
    finally:
        scheduler.close()
        sweeper.close()

    # Entry 1: attempt 1 at 0 s; its retry decision lost the race and invoked nothing.
    # Entry 2 (at 1 s): attempt 1, then its three retries at 1, 2 and 3 s after each other.
    assert calls == [
        (1, 1, T0),
        (2, 1, T0 + 1 * S),
        (2, 2, T0 + 2 * S),
        (2, 3, T0 + 4 * S),
        (2, 4, T0 + 7 * S),
    ]


class SlowInsertStore(InMemoryFlowStore):
    """Runs ``before_insert`` (once) between a decision's schedule() and its store insert."""

    def __init__(self) -> None:
        super().__init__()
        self.before_insert: list[Callable[[], object]] = []

    def insert(self, instance: FlowInstance) -> FlowInstance:
        if self.before_insert:
            self.before_insert.pop()()
        return super().insert(instance)


def test_a_timer_delivered_before_its_instance_is_stored_is_redelivered_and_applied(
    clock: ManualClock,
) -> None:
    """Node W starts a flow whose deadline is already past; node L sweeps between W's
    schedule() and W's insert, finds no instance yet, and the timer comes back later."""
    flow = (
        Flow("F")
        .initial("S", invokes="A")
        .terminal("Done", "TooLate")
        .on(ProcessingTimeElapsedEvent, in_state="S", go_to="TooLate")
    )
    conf = "ipf.flow.F.processing-time.S.Done { timeout-duration = 5s, offset-id = AcceptedAt }"
    timers = mongomock.MongoClient()["db"]["timers"]
    store = SlowInsertStore()
    nodes = {}
    for name in ("W", "L"):
        scheduler = MongoScheduler(timers, node_id=name, clock=clock)
        domain = (
            FlowDomain.builder()
            .with_config(SchedulingConfig.from_string(conf))
            .with_scheduler_adapter(scheduler)
            .with_flow_store(store)
            .with_clock(clock)
            .with_flow(flow)
            .with_action_adapter("A", lambda r: None)
            .build()
        )
        nodes[name] = (scheduler, domain)
    delivered_early: list[int] = []
    store.before_insert.append(lambda: delivered_early.append(nodes["L"][0].run_due()))

    nodes["W"][1].start("F", "f1", offsets={"AcceptedAt": T0 - 1 * M})

    assert delivered_early == [1]  # L saw the deadline before the instance existed ...
    assert nodes["W"][1].instance("f1").state == "S"  # type: ignore[union-attr]
    clock.advance(3 * S)  # ... and handed it back: redelivered 3 s later
    nodes["L"][0].run_due()
    assert nodes["W"][1].instance("f1").state == "TooLate"  # type: ignore[union-attr]
    assert nodes["L"][0].dead_letters() == []


def test_a_timer_ahead_of_the_instance_is_dropped_after_three_redeliveries(
    harness: HarnessFactory,
) -> None:
    """The decision that scheduled it was never stored (it lost a race, its node died):
    retried a bounded number of times, then a no-op success, never redelivered forever."""
    h = harness("", flows=(_flow(),))
    h.domain.start("F", "f1")  # S is entry 1; nothing ever stores entry 5
    ahead = ActionTimer("F", "S", "A", entry=5).item("f1", ScheduleKind.ACTION_TIMEOUT, T0)
    h.scheduler.schedule(ahead)

    for wait in (0 * S, 3 * S, 6 * S):  # the delivery, then redeliveries after 3 s and 6 s
        h.advance(wait)
        assert h.scheduler.exists(ahead.id)
    h.advance(12 * S)  # the fourth delivery gives up quietly

    assert not h.scheduler.exists(ahead.id)
    assert h.scheduler.dead_letters() == []
    instance = h.domain.instance("f1")
    assert instance is not None and (instance.state, instance.entry) == ("S", 1)
