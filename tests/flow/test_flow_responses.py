"""A completing response cancels its action's timeout and retries; a non-completing one does not."""

from __future__ import annotations

from flowkit import (
    FLOW,
    FraudCheckPassed,
    FraudCheckQueued,
    HarnessFactory,
    S,
    SchemeRulesValidated,
)

from flowsched.flow.timers import action_timer_id
from flowsched.port import ScheduleKind

VALIDATED = {"ValidateAgainstSchemeRules": SchemeRulesValidated()}
CONF = """
Any.CheckingFraud.CheckFraud.timeout-duration = 30s
Any.CheckingFraud.CheckFraud.max-retries = 5
Any.CheckingFraud.CheckFraud.backoff-type = LINEAR
Any.CheckingFraud.CheckFraud.initial-retry-interval = 2s
Any.CheckingFraud.CheckFraud.jitter-enabled = false
"""
TIMEOUT_ID = action_timer_id("tx-1", "CheckingFraud", 2, "CheckFraud", ScheduleKind.ACTION_TIMEOUT)
RETRY_ID = action_timer_id("tx-1", "CheckingFraud", 2, "CheckFraud", ScheduleKind.ACTION_RETRY)


def test_a_completing_response_cancels_the_timeout_and_the_retries(
    harness: HarnessFactory,
) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")
    h.advance(2 * S)  # one retry so far
    assert h.scheduler.exists(TIMEOUT_ID) and h.scheduler.exists(RETRY_ID)

    h.domain.handle("tx-1", FraudCheckPassed())

    assert not h.scheduler.exists(TIMEOUT_ID) and not h.scheduler.exists(RETRY_ID)
    h.advance(60 * S)
    assert h.attempts("CheckFraud") == [0 * S, 2 * S]
    assert h.state() == "Complete"


def test_a_completing_response_without_a_transition_still_stops_the_timers(
    harness: HarnessFactory,
) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")

    # SchemeRulesValidated answers ValidateAgainstSchemeRules, not CheckFraud: nothing changes.
    h.domain.handle("tx-1", SchemeRulesValidated())
    assert h.scheduler.exists(TIMEOUT_ID)

    instance = h.domain.handle("tx-1", FraudCheckPassed())
    assert instance.state == "Complete"


def test_a_non_completing_response_leaves_timeout_and_retries_running(
    harness: HarnessFactory,
) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")

    h.domain.handle("tx-1", FraudCheckQueued())

    assert h.scheduler.exists(TIMEOUT_ID) and h.scheduler.exists(RETRY_ID)
    for _ in range(30):  # step by step: each retry counts from the attempt before it
        h.advance(1 * S)
    assert h.attempts("CheckFraud") == [0 * S, 2 * S, 6 * S, 12 * S, 20 * S]
    assert h.state() == "FraudTimedOut"


def test_a_response_returned_by_the_adapter_is_handled_at_once(harness: HarnessFactory) -> None:
    h = harness(CONF, respond={**VALIDATED, "CheckFraud": FraudCheckPassed()})

    instance = h.domain.start(FLOW, "tx-1")

    assert h.state() == "Complete"
    assert instance.state == "ValidatingSchemeRules"  # start returns the instance it created
    assert not h.scheduler.exists(TIMEOUT_ID)


def test_an_adapter_that_raises_is_retried_on_schedule(harness: HarnessFactory) -> None:
    def unreachable(request: object) -> object:
        raise ConnectionError("fraud service down")

    h = harness(CONF, respond=VALIDATED, adapters={"CheckFraud": unreachable})
    h.domain.start(FLOW, "tx-1")

    for _ in range(6):
        h.advance(1 * S)

    assert h.attempts("CheckFraud") == [0 * S, 2 * S, 6 * S]


def test_timers_lists_what_the_instance_waits_on_until_it_is_answered(
    harness: HarnessFactory,
) -> None:
    h = harness(CONF, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")

    waiting = h.domain.timers("tx-1")

    assert [(item.id, item.due - h.clock.now()) for item in waiting] == [
        (RETRY_ID, 2 * S),
        (TIMEOUT_ID, 30 * S),
    ]
    h.domain.handle("tx-1", FraudCheckPassed())
    assert h.domain.timers("tx-1") == []
