"""Re-entering a state starts its actions and timers afresh; the old ones can never fire."""

from __future__ import annotations

from dataclasses import dataclass

from flowkit import FLOW, T0, HarnessFactory, S

from flowsched.flow import ActionTimeoutEvent, Flow, ProcessingTimeElapsedEvent
from flowsched.flow.timers import action_timer_id, deadline_timer_id
from flowsched.port import ScheduleKind

CONF = "Any.Polling.Poll.timeout-duration = 10s"
FIRST_TIMEOUT_ID = action_timer_id("tx-1", "Polling", 1, "Poll", ScheduleKind.ACTION_TIMEOUT)
TIMEOUT_ID = action_timer_id("tx-1", "Polling", 2, "Poll", ScheduleKind.ACTION_TIMEOUT)
DEADLINE_CONF = "ipf.flow.OBCreditTransfer.processing-time.Polling.GaveUp.timeout-duration = 10s"


@dataclass(frozen=True)
class Again:
    """Poll once more from the start."""


def _flow() -> Flow:
    return (
        Flow(FLOW)
        .initial("Polling", invokes="Poll")
        .terminal("GaveUp")
        .on(Again, in_state="Polling", go_to="Polling")
        .on(ActionTimeoutEvent, in_state="Polling", go_to="GaveUp")
    )


def test_a_self_transition_restarts_the_timeout_from_the_new_entry(
    harness: HarnessFactory,
) -> None:
    h = harness(CONF, flows=(_flow(),))
    h.domain.start(FLOW, "tx-1")
    h.advance(6 * S)

    instance = h.domain.handle("tx-1", Again())

    assert instance.entry == 2 and instance.offsets["Polling"] == T0 + 6 * S
    assert not h.scheduler.exists(FIRST_TIMEOUT_ID)  # the first entry's timeout is cancelled
    item = h.scheduler.get(TIMEOUT_ID)
    assert item is not None and item.due == T0 + 16 * S
    h.advance(9 * S)
    assert h.state() == "Polling"
    h.advance(1 * S)
    assert h.state() == "GaveUp"
    assert h.attempts("Poll") == [0 * S, 6 * S]


def test_re_entering_a_source_state_re_arms_its_deadline_from_the_new_entry(
    harness: HarnessFactory,
) -> None:
    flow = _flow().on(ProcessingTimeElapsedEvent, in_state="Polling", go_to="GaveUp")
    h = harness(DEADLINE_CONF, flows=(flow,))
    h.domain.start(FLOW, "tx-1")
    h.advance(6 * S)

    instance = h.domain.handle("tx-1", Again())

    assert [(d.entry, d.due) for d in instance.deadlines] == [(2, T0 + 16 * S)]
    assert [t.due for t in h.domain.timers("tx-1")] == [T0 + 16 * S]
    assert not h.scheduler.exists(deadline_timer_id("tx-1", "Polling", 1, "GaveUp"))
    h.advance(9 * S)
    assert h.state() == "Polling"
    h.advance(1 * S)
    assert h.state() == "GaveUp"
