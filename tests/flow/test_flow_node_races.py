"""Two nodes sharing one flow store and one timer store never lose each other's timers.

A decision taken on an older state entry (it lost a race to another node) only writes timers
of that older entry: timer ids carry the entry number, so it cannot replace the winner's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from flowkit import T0, S

from flowsched import InMemoryScheduler, ManualClock, SchedulingConfig
from flowsched.flow import ActionRequest, Flow, FlowDomain, FlowInstance, InMemoryFlowStore
from flowsched.flow.timers import action_timer_id
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
    scheduler = InMemoryScheduler(clock=clock)
    store = InterleavingStore()
    calls: list[tuple[int, int, datetime]] = []
    winner = _node(scheduler, store, clock, calls)
    _node(scheduler, store, clock, calls)  # the loser: its handlers now receive the timers
    winner.start("F", "f1")
    # The first retry (entry 1) fires on the loser; right after it loads the instance, the
    # winner re-enters S (entry 2, a fresh retry schedule from 1 s).
    store.after_load.append(lambda: winner.handle("f1", Again()))

    clock.advance(1 * S)
    try:
        retry_of_entry_2 = scheduler.get(
            action_timer_id("f1", "S", 2, "A", ScheduleKind.ACTION_RETRY)
        )
        assert retry_of_entry_2 is not None and retry_of_entry_2.payload is not None
        assert retry_of_entry_2.payload["entry"] == 2 and retry_of_entry_2.due == T0 + 2 * S
        for _ in range(10):  # one second at a time: each retry is seen at its own time
            clock.advance(1 * S)
    finally:
        scheduler.close()

    # Entry 1: attempt 1 at 0 s; its retry decision lost the race and invoked nothing.
    # Entry 2 (at 1 s): attempt 1, then its three retries at 1, 2 and 3 s after each other.
    assert calls == [
        (1, 1, T0),
        (2, 1, T0 + 1 * S),
        (2, 2, T0 + 2 * S),
        (2, 3, T0 + 4 * S),
        (2, 4, T0 + 7 * S),
    ]
