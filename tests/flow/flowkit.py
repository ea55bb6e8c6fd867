"""Test kit for the flow tests: a credit-transfer flow and a harness that runs it end to end.

``make_harness(clock, conf, ...)`` builds a FlowDomain from HOCON text with an
InMemoryScheduler on a ManualClock, and records every action invocation (time, request) and
the timeline. The ``harness`` fixture (conftest.py) wraps it and closes the schedulers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched import InMemoryScheduler, ManualClock, SchedulingConfig
from flowsched.flow import (
    ANY_STATE,
    ActionRequest,
    ActionTimeoutEvent,
    Flow,
    FlowDomain,
    FlowStore,
    ProcessingTimeElapsedEvent,
    TimelineEntry,
)
from flowsched.port import SchedulerPort

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)
M = timedelta(minutes=1)
FLOW = "OBCreditTransfer"


@dataclass(frozen=True)
class SchemeRulesValidated:
    """Completing response to ValidateAgainstSchemeRules."""


@dataclass(frozen=True)
class FraudCheckPassed:
    """Completing response to CheckFraud."""


@dataclass(frozen=True)
class FraudCheckQueued:
    """Non-completing response (an acknowledgement) to CheckFraud."""


def credit_transfer(validating: str = "ValidatingSchemeRules") -> Flow:
    """ValidatingSchemeRules → CheckingFraud → Complete, with timeout states."""
    return (
        Flow(FLOW)
        .initial(validating, invokes="ValidateAgainstSchemeRules")
        .state("CheckingFraud", invokes="CheckFraud")
        .terminal("Complete", "FraudTimedOut", "ValidationTimedOut", "TooSlow")
        .response(SchemeRulesValidated, to="ValidateAgainstSchemeRules")
        .response(FraudCheckPassed, to="CheckFraud")
        .response(FraudCheckQueued, to="CheckFraud", completing=False)
        .on(SchemeRulesValidated, in_state=validating, go_to="CheckingFraud")
        .on(FraudCheckPassed, in_state="CheckingFraud", go_to="Complete")
        .on(
            ActionTimeoutEvent, in_state="CheckingFraud", action="CheckFraud", go_to="FraudTimedOut"
        )
        .on(
            ActionTimeoutEvent,
            in_state=validating,
            action="ValidateAgainstSchemeRules",
            go_to="ValidationTimedOut",
        )
        .on(ProcessingTimeElapsedEvent, in_state=ANY_STATE, destination="Complete", go_to="TooSlow")
    )


@dataclass(frozen=True)
class Call:
    at: datetime
    request: ActionRequest


@dataclass
class Harness:
    clock: ManualClock
    domain: FlowDomain
    scheduler: SchedulerPort
    calls: list[Call] = field(default_factory=list)
    timeline: list[TimelineEntry] = field(default_factory=list)

    def attempts(self, action: str, flow_id: str | None = None) -> list[timedelta]:
        """When ``action`` was invoked, as offsets from T0."""
        return [
            c.at - T0
            for c in self.calls
            if c.request.action == action and flow_id in (None, c.request.flow_id)
        ]

    def state(self, flow_id: str = "tx-1") -> str:
        instance = self.domain.instance(flow_id)
        assert instance is not None
        return instance.state

    def advance(self, delta: timedelta) -> None:
        self.clock.advance(delta)
        run_due = getattr(self.scheduler, "run_due", None)
        if run_due is not None:
            run_due()

    def advance_to(self, offset: timedelta) -> None:
        """Move to T0 + ``offset``."""
        self.advance(T0 + offset - self.clock.now())


HarnessFactory = Callable[..., Harness]


def make_harness(
    clock: ManualClock,
    conf: str,
    *,
    flows: tuple[Flow, ...] | None = None,
    respond: Mapping[str, object] | None = None,
    adapters: Mapping[str, Callable[[ActionRequest], object]] | None = None,
    scheduler: SchedulerPort | None = None,
    store: FlowStore | None = None,
    rng: random.Random | None = None,
    **options: Any,
) -> Harness:
    """``respond``: action → response returned at once; ``adapters``: action → callable;
    other actions answer nothing. ``options`` go to ``with_options``."""
    sched = scheduler or InMemoryScheduler(clock=clock)
    flows = flows or (credit_transfer(),)
    builder = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(conf))
        .with_scheduler_adapter(sched)
        .with_clock(clock)
    )
    for flow in flows:
        builder.with_flow(flow)
    if store is not None:
        builder.with_flow_store(store)
    if rng is not None:
        builder.with_random(rng)
    if options:
        builder.with_options(**options)
    calls: list[Call] = []
    answers = dict(respond or {})

    def record(request: ActionRequest) -> object:
        calls.append(Call(clock.now(), request))
        custom = (adapters or {}).get(request.action)
        if custom is not None:
            return custom(request)
        return answers.get(request.action)

    for action in {a for flow in flows for a in flow.build().actions}:
        builder.with_action_adapter(action, record)
    timeline: list[TimelineEntry] = []
    builder.with_listener(timeline.append)
    return Harness(clock, builder.build(), sched, calls, timeline)
