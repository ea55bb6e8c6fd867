"""Re-entering a state starts its actions and timers afresh; the old ones can never fire."""

from __future__ import annotations

from dataclasses import dataclass

from flowkit import FLOW, T0, HarnessFactory, S

from flowsched.flow import ActionTimeoutEvent, Flow
from flowsched.flow.timers import action_timer_id
from flowsched.port import ScheduleKind

CONF = "Any.Polling.Poll.timeout-duration = 10s"
TIMEOUT_ID = action_timer_id("tx-1", "Polling", "Poll", ScheduleKind.ACTION_TIMEOUT)


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
    item = h.scheduler.get(TIMEOUT_ID)
    assert item is not None and item.due == T0 + 16 * S  # rescheduled, not cancelled
    h.advance(9 * S)
    assert h.state() == "Polling"
    h.advance(1 * S)
    assert h.state() == "GaveUp"
    assert h.attempts("Poll") == [0 * S, 6 * S]
