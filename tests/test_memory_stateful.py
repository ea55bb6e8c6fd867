"""InMemoryScheduler against a plain reference model, driven by random operation sequences.

The model is the specification in a few lines: an item is delivered once the clock reaches
its due time and a handler for its kind exists, in (due, schedule order) order, at its due
time (virtual time steps through each advance); a failing delivery comes back
``RedeliveryPolicy.delay(failures)`` after it failed with ``attempt`` + 1, or is
dead-lettered at ``max_attempts``; replace, cancel and cancel_flow drop the old form. The
scheduler must deliver exactly the same (id, generation, attempt) sequence and agree on
``exists``, ``pending`` and the dead letters after every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy

IDS = ["a", "b", "c"]
FLOWS = [None, "flow-1", "flow-2"]
KINDS = [ScheduleKind.TIMER, ScheduleKind.ACTION_RETRY]
START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Planned:
    """The model's view of one scheduled item."""

    due: datetime
    generation: int
    attempt: int
    kind: ScheduleKind
    flow_id: str | None


class SchedulerVersusModel(RuleBasedStateMachine):
    @initialize(
        max_attempts=st.sampled_from([None, 1, 3]),
        failing=st.sets(st.sampled_from(IDS)),
    )
    def build(self, max_attempts: int | None, failing: set[str]) -> None:
        self.policy = RedeliveryPolicy(max_attempts=max_attempts)
        self.clock = ManualClock(START)
        self.scheduler = InMemoryScheduler(clock=self.clock, redelivery=self.policy)
        self.failing = set(failing)
        self.delivered: list[tuple[str, int, int]] = []
        # The model.
        self.items: dict[str, Planned] = {}
        self.dead: dict[str, int] = {}
        self.subscribed: set[ScheduleKind] = set()
        self.expected: list[tuple[str, int, int]] = []
        # TIMER has a handler from the start; ACTION_RETRY items wait for the subscribe rule.
        self.subscribe(ScheduleKind.TIMER)

    def handler(self, item: ScheduleItem, attempt: int) -> None:
        self.delivered.append((item.id, item.generation, attempt))
        if item.id in self.failing:
            raise RuntimeError(f"{item.id} fails")

    @rule(
        item_id=st.sampled_from(IDS),
        kind=st.sampled_from(KINDS),
        # Few distinct offsets, so that equal due times (ties) are common.
        offset_ms=st.sampled_from([-1_000, 0, 500, 3_000, 10_000, 40_000]),
        flow_id=st.sampled_from(FLOWS),
    )
    def schedule(
        self, item_id: str, kind: ScheduleKind, offset_ms: int, flow_id: str | None
    ) -> None:
        due = self.clock.now() + timedelta(milliseconds=offset_ms)
        stored = self.scheduler.schedule(ScheduleItem(item_id, kind, due, flow_id=flow_id))
        self.items[item_id] = Planned(due, stored.generation, 0, kind, flow_id)
        self.dead.pop(item_id, None)

    @rule(item_id=st.sampled_from(IDS))
    def cancel(self, item_id: str) -> None:
        assert self.scheduler.cancel(item_id) is (item_id in self.items)
        self.items.pop(item_id, None)

    @rule(flow_id=st.sampled_from(FLOWS[1:]))
    def cancel_flow(self, flow_id: str) -> None:
        ids = [i for i, p in self.items.items() if p.flow_id == flow_id]
        assert self.scheduler.cancel_flow(flow_id) == len(ids)
        for item_id in ids:
            del self.items[item_id]

    @rule(kind=st.sampled_from(KINDS))
    def subscribe_rule(self, kind: ScheduleKind) -> None:
        self.subscribe(kind)

    def subscribe(self, kind: ScheduleKind) -> None:
        if kind in self.subscribed:  # one handler per kind: a second one is refused
            with pytest.raises(ValueError, match="already has a handler"):
                self.scheduler.subscribe(kind, self.handler)
            return
        self.scheduler.subscribe(kind, self.handler)
        self.subscribed.add(kind)

    @rule(item_id=st.sampled_from(IDS))
    def toggle_failing(self, item_id: str) -> None:
        self.failing ^= {item_id}

    @rule(item_id=st.sampled_from(IDS))
    def requeue(self, item_id: str) -> None:
        assert self.scheduler.requeue(item_id) is (item_id in self.dead)
        if item_id in self.dead:
            del self.dead[item_id]
            requeued = self.scheduler.get(item_id)
            assert requeued is not None
            self.items[item_id] = Planned(
                self.clock.now(), requeued.generation, 0, requeued.kind, requeued.flow_id
            )

    @rule(
        steps_ms=st.lists(
            st.sampled_from([0, 1, 999, 1_000, 2_999, 3_000, 6_000, 30_000]),
            min_size=1,
            max_size=6,
        )
    )
    def advance(self, steps_ms: list[int]) -> None:
        for step_ms in steps_ms:
            self.advance_once(step_ms)

    def advance_once(self, step_ms: int) -> None:
        now = self.clock.now()
        target = self.clock.advance(timedelta(milliseconds=step_ms))
        # Virtual time: one item at a time, in (due, schedule order) order, each at its own
        # due time (or now, if it was already due); redeliveries inside the window come too.
        while True:
            due = sorted(
                (p.due, p.generation, item_id)
                for item_id, p in self.items.items()
                if p.due <= target and p.kind in self.subscribed
            )
            if not due:
                break
            when, generation, item_id = due[0]
            now = max(now, when)
            planned = self.items[item_id]
            self.expected.append((item_id, generation, planned.attempt))
            if item_id not in self.failing:
                del self.items[item_id]
                continue
            failures = planned.attempt + 1
            limit = self.policy.max_attempts
            if limit is not None and failures >= limit:
                del self.items[item_id]
                self.dead[item_id] = failures
            else:
                planned.attempt = failures
                planned.due = now + self.policy.delay(failures)
        assert self.delivered == self.expected

    @invariant()
    def same_view(self) -> None:
        if not hasattr(self, "scheduler"):
            return
        assert self.delivered == self.expected
        assert {i for i in IDS if self.scheduler.exists(i)} == set(self.items)
        assert self.scheduler.pending() == len(self.items)
        dead = [(d.item.id, d.attempts) for d in self.scheduler.dead_letters()]
        assert dead == list(self.dead.items())

    def teardown(self) -> None:
        if hasattr(self, "scheduler"):
            self.scheduler.close()


SchedulerVersusModel.TestCase.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None
)
test_scheduler_matches_the_model = SchedulerVersusModel.TestCase
