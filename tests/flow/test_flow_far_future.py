"""Durations that reach past the year 9999 mean "never": no timer, no error, no endless retry."""

from __future__ import annotations

from datetime import timedelta

from flowkit import FLOW, T0, HarnessFactory, SchemeRulesValidated

from flowsched import SchedulingConfig

VALIDATED = {"ValidateAgainstSchemeRules": SchemeRulesValidated()}
CHECK = "Any.CheckingFraud.CheckFraud"
PT = "ipf.flow.OBCreditTransfer.processing-time"


def test_a_timeout_past_the_year_9999_never_fires(harness: HarnessFactory) -> None:
    h = harness(f"{CHECK}.timeout-duration = 3000000d", respond=VALIDATED)

    h.domain.start(FLOW, "tx-1")  # validated at once: on to CheckingFraud

    instance = h.domain.instance("tx-1")
    assert instance is not None and instance.state == "CheckingFraud"
    assert [run.deadline for run in instance.actions] == [None]
    assert h.domain.timers("tx-1") == []


def test_a_processing_time_past_the_year_9999_is_not_scheduled(harness: HarnessFactory) -> None:
    h = harness(f"{PT}.ValidatingSchemeRules.Complete.timeout-duration = 3000000d")

    instance = h.domain.start(FLOW, "tx-1")

    assert instance.deadlines == ()
    assert h.domain.timers("tx-1") == []
    assert any("past the year 9999" in e.detail for e in h.timeline)


def test_exponential_retries_stop_where_their_due_time_would_pass_the_year_9999(
    harness: HarnessFactory,
) -> None:
    conf = f"""
    {CHECK}.max-retries = 60
    {CHECK}.initial-retry-interval = 1s
    {CHECK}.jitter-enabled = false
    """
    h = harness(conf, respond=VALIDATED)
    policy = SchedulingConfig.from_string(conf).action(FLOW, "CheckingFraud", "CheckFraud")
    reachable = policy.retry_due_times(T0)
    assert 0 < len(reachable) < 60  # retry 2**n s overflows long before retry 60

    h.domain.start(FLOW, "tx-1")
    h.advance(timedelta(days=365 * 7000))  # past the last reachable retry, before 9999

    attempts = [c.request.attempt for c in h.calls if c.request.action == "CheckFraud"]
    assert attempts == list(range(1, len(reachable) + 2))
    assert h.domain.timers("tx-1") == []
    assert h.scheduler.dead_letters() == []
    assert any("past the year 9999" in e.detail for e in h.timeline)
