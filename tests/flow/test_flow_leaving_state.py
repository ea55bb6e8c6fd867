"""Leaving a state cancels its pending retries; IPF's behaviour (they fire on) is an option."""

from __future__ import annotations

from dataclasses import dataclass

from flowkit import FLOW, HarnessFactory, S

from flowsched.flow import Flow
from flowsched.flow.timers import action_timer_id
from flowsched.port import ScheduleKind

CONF = """
Any.Polling.Poll.max-retries = 5
Any.Polling.Poll.backoff-type = LINEAR
Any.Polling.Poll.initial-retry-interval = 10s
Any.Polling.Poll.jitter-enabled = false
Any.Polling.Poll.timeout-duration = 5m
"""


@dataclass(frozen=True)
class Skip:
    """Not a response to Poll: moves the flow on while Poll is still unanswered."""


def _flow() -> Flow:
    return (
        Flow(FLOW)
        .initial("Polling", invokes="Poll")
        .state("Waiting")
        .terminal("Done")
        .on(Skip, in_state="Polling", go_to="Waiting")
        .on(Skip, in_state="Waiting", go_to="Done")
    )


RETRY_ID = action_timer_id("tx-1", "Polling", 1, "Poll", ScheduleKind.ACTION_RETRY)
TIMEOUT_ID = action_timer_id("tx-1", "Polling", 1, "Poll", ScheduleKind.ACTION_TIMEOUT)


def test_leaving_a_state_cancels_its_retries_and_timeout(harness: HarnessFactory) -> None:
    h = harness(CONF, flows=(_flow(),))
    h.domain.start(FLOW, "tx-1")
    h.advance(10 * S)

    h.domain.handle("tx-1", Skip())

    assert not h.scheduler.exists(RETRY_ID) and not h.scheduler.exists(TIMEOUT_ID)
    h.advance(600 * S)
    assert h.attempts("Poll") == [0 * S, 10 * S]
    assert h.state() == "Waiting"


def test_with_ipf_behaviour_retries_keep_firing_after_the_state_is_left(
    harness: HarnessFactory,
) -> None:
    h = harness(CONF, flows=(_flow(),), cancel_retries_on_exit=False)
    h.domain.start(FLOW, "tx-1")
    h.advance(10 * S)

    h.domain.handle("tx-1", Skip())
    h.advance(20 * S)

    assert h.attempts("Poll") == [0 * S, 10 * S, 30 * S]
    assert all(c.request.state == "Polling" for c in h.calls)
    assert h.state() == "Waiting"


def test_even_with_ipf_behaviour_a_finished_flow_gets_no_retries(harness: HarnessFactory) -> None:
    h = harness(CONF, flows=(_flow(),), cancel_retries_on_exit=False)
    h.domain.start(FLOW, "tx-1")
    h.domain.handle("tx-1", Skip())
    h.domain.handle("tx-1", Skip())

    h.advance(600 * S)

    assert h.attempts("Poll") == [0 * S]
    assert h.state() == "Done"


def test_with_ipf_behaviour_retries_that_outlive_their_state_still_stop_at_the_timeout(
    harness: HarnessFactory,
) -> None:
    # Waits 10, 20, 30 s: retries due at 10, 30, 60 s; the 50 s timeout cuts the third. The
    # state is left after the first retry: the second still knows its action's deadline.
    h = harness(
        CONF.replace("timeout-duration = 5m", "timeout-duration = 50s"),
        flows=(_flow(),),
        cancel_retries_on_exit=False,
    )
    h.domain.start(FLOW, "tx-1")
    h.advance(10 * S)
    h.domain.handle("tx-1", Skip())

    h.advance(600 * S)

    assert h.attempts("Poll") == [0 * S, 10 * S, 30 * S]
    assert h.state() == "Waiting"
