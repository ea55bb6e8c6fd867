"""A timer that no longer concerns the flow is a no-op success: never an error, never redelivered.

Seed 000: "nothing to do" is success; an error would be redelivered for as long as it fails.
"""

from __future__ import annotations

from datetime import timedelta

from flowkit import FLOW, T0, FraudCheckPassed, Harness, HarnessFactory, S, SchemeRulesValidated

from flowsched.flow.timers import ActionTimer, DeadlineTimer
from flowsched.port import ScheduleKind

VALIDATED = {"ValidateAgainstSchemeRules": SchemeRulesValidated()}
CONF = """
Any.CheckingFraud.CheckFraud.timeout-duration = 20s
Any.CheckingFraud.CheckFraud.max-retries = 3
Any.CheckingFraud.CheckFraud.backoff-type = LINEAR
Any.CheckingFraud.CheckFraud.initial-retry-interval = 5s
Any.CheckingFraud.CheckFraud.jitter-enabled = false
"""


def _replay(h: Harness, flow_id: str, kind: ScheduleKind, due: timedelta, **timer: object) -> str:
    """Schedule a timer by hand, as a late or duplicate delivery would present it."""
    fields = {"flow": FLOW, "state": "CheckingFraud", "action": "CheckFraud", "entry": 2, **timer}
    item = ActionTimer(**fields).item(flow_id, kind, T0 + due)  # type: ignore[arg-type]
    h.scheduler.schedule(item)
    return item.id


def _assert_completed_quietly(h: Harness, item_id: str) -> None:
    assert not h.scheduler.exists(item_id)  # returned normally: completed, not redelivered
    assert h.scheduler.dead_letters() == []
    assert h.timeline[-1].what == "ignored"


def test_a_timeout_for_a_finished_flow_is_a_no_op(harness: HarnessFactory) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")
    h.domain.handle("tx-1", FraudCheckPassed())
    item_id = _replay(h, "tx-1", ScheduleKind.ACTION_TIMEOUT, 20 * S, deadline=T0 + 20 * S)

    h.advance(20 * S)

    assert h.state() == "Complete"
    _assert_completed_quietly(h, item_id)
    assert "already finished" in h.timeline[-1].detail


def test_a_timer_for_an_unknown_instance_is_a_no_op(harness: HarnessFactory) -> None:
    h = harness(CONF)
    item_id = _replay(h, "ghost", ScheduleKind.ACTION_TIMEOUT, 1 * S)

    h.advance(1 * S)

    assert not h.scheduler.exists(item_id)
    assert h.scheduler.dead_letters() == []
    assert h.domain.instance("ghost") is None


def test_a_timer_from_an_earlier_visit_of_the_state_is_a_no_op(harness: HarnessFactory) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")  # CheckingFraud is entry 2
    stale = DeadlineTimer(FLOW, "ValidatingSchemeRules", "Complete", entry=1).item("tx-1", T0)
    h.scheduler.schedule(stale)

    h.advance(1 * S)

    assert h.state() == "CheckingFraud"
    _assert_completed_quietly(h, stale.id)


def test_a_redelivered_retry_does_not_invoke_the_action_twice(harness: HarnessFactory) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")
    h.advance(5 * S)  # retry 1 made attempt 2; retry 2 (attempt 3) is due at 15 s
    assert h.attempts("CheckFraud") == [0 * S, 5 * S]

    item_id = _replay(h, "tx-1", ScheduleKind.ACTION_RETRY, 6 * S, attempt=2)
    h.advance(1 * S)

    assert h.attempts("CheckFraud") == [0 * S, 5 * S]
    assert "attempt 2 already made" in h.timeline[-1].detail
    assert not h.scheduler.exists(item_id)


def test_a_duplicate_timeout_moves_the_flow_once(harness: HarnessFactory) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")
    h.advance(20 * S)
    assert h.state() == "FraudTimedOut"
    entries = len([e for e in h.timeline if e.what == "entered"])

    _replay(h, "tx-1", ScheduleKind.ACTION_TIMEOUT, 21 * S, deadline=T0 + 20 * S)
    h.advance(1 * S)

    assert len([e for e in h.timeline if e.what == "entered"]) == entries
