"""No lost updates: one instance is decided one event at a time, across threads and processes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from flowkit import FLOW, T0, HarnessFactory

from flowsched import InMemoryScheduler, ManualClock, SchedulingConfig
from flowsched.flow import Flow, FlowDomain, FlowInstance, InMemoryFlowStore


@dataclass(frozen=True)
class Step:
    pass


def _ladder() -> Flow:
    """One, Two, Three, Done: each Step moves one rung; only every step applied reaches Done."""
    return (
        Flow(FLOW)
        .initial("One")
        .state("Two")
        .state("Three")
        .terminal("Done")
        .on(Step, in_state="One", go_to="Two")
        .on(Step, in_state="Two", go_to="Three")
        .on(Step, in_state="Three", go_to="Done")
    )


class RacingStore(InMemoryFlowStore):
    """Before its first update, lets another process change the same instance first."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: list[Callable[[], object]] = []
        self.conflicts = 0

    def update(self, instance: FlowInstance) -> FlowInstance:
        while self.meanwhile:
            race = self.meanwhile.pop()
            race()
        try:
            return super().update(instance)
        except Exception:
            self.conflicts += 1
            raise


def test_a_decision_that_lost_a_race_is_made_again_on_the_new_state(
    harness: HarnessFactory, clock: ManualClock
) -> None:
    store = RacingStore()
    h = harness("", flows=(_ladder(),), store=store)
    other = (  # a second process on the same store
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(""))
        .with_scheduler_adapter(InMemoryScheduler(clock=clock))
        .with_flow(_ladder())
        .with_flow_store(store)
        .with_clock(clock)
        .build()
    )
    h.domain.start(FLOW, "tx-1")
    store.meanwhile.append(lambda: other.handle("tx-1", Step()))

    h.domain.handle("tx-1", Step())

    assert store.conflicts == 1
    assert h.state() == "Three"  # both steps applied: One → Two (other) → Three (this one)


def test_events_for_many_instances_from_many_threads_are_all_applied(
    harness: HarnessFactory,
) -> None:
    h = harness("", flows=(_ladder(),))
    ids = [f"tx-{n}" for n in range(20)]
    for flow_id in ids:
        h.domain.start(FLOW, flow_id)
    barrier = threading.Barrier(6)

    def push(flow_id: str) -> None:
        h.domain.handle(flow_id, Step())

    def worker(offset: int) -> None:
        barrier.wait(timeout=60)
        for flow_id in ids[offset:] + ids[:offset]:
            push(flow_id)

    with ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(worker, n) for n in range(3)] + [
            pool.submit(worker, n * 7) for n in range(3)
        ]:
            future.result(timeout=120)

    # Six steps each: three reach Done, the rest are ignored once finished.
    assert {h.state(flow_id) for flow_id in ids} == {"Done"}
    instance = h.domain.instance("tx-0")
    assert instance is not None and instance.version == 4
    assert instance.offsets["One"] == T0
