"""Processing time: from entering a source state, the destination must be reached in time."""

from __future__ import annotations

from flowkit import (
    FLOW,
    T0,
    FraudCheckPassed,
    Harness,
    HarnessFactory,
    S,
    SchemeRulesValidated,
    credit_transfer,
)

from flowsched.flow.timers import deadline_timer_id

SOURCE = "ValidatingAgainstSchemeRules"  # the seed's name for the validating state
SEED = f"ipf.flow.{FLOW}.processing-time.{SOURCE}.Complete.timeout-duration=2s"
DEADLINE_ID = deadline_timer_id("tx-1", SOURCE, 1, "Complete")


def _harness(harness: HarnessFactory, conf: str = SEED, **kw: object) -> Harness:
    return harness(conf, flows=(credit_transfer(validating=SOURCE),), **kw)


def test_the_seed_deadline_fires_2s_after_entering_the_source(harness: HarnessFactory) -> None:
    h = _harness(harness)
    h.domain.start(FLOW, "tx-1")

    h.advance(1 * S)
    assert h.state() == SOURCE
    h.advance(1 * S)

    assert h.state() == "TooSlow"
    fired = [e for e in h.timeline if e.what == "fired"]
    assert len(fired) == 1 and fired[0].at == T0 + 2 * S
    assert fired[0].config_key == (
        f"ipf.flow.{FLOW}.processing-time.{SOURCE}.Complete.timeout-duration"
    )


def test_reaching_the_destination_in_time_cancels_the_deadline(harness: HarnessFactory) -> None:
    h = _harness(harness)
    h.domain.start(FLOW, "tx-1")
    h.advance(1 * S)
    assert h.scheduler.exists(DEADLINE_ID)

    h.domain.handle("tx-1", SchemeRulesValidated())
    h.domain.handle("tx-1", FraudCheckPassed())

    assert not h.scheduler.exists(DEADLINE_ID)
    h.advance(10 * S)
    assert h.state() == "Complete"
    assert not [e for e in h.timeline if e.what == "fired"]


def test_the_deadline_holds_whatever_the_journey(harness: HarnessFactory) -> None:
    h = _harness(harness)
    h.domain.start(FLOW, "tx-1")
    h.advance(1 * S)
    h.domain.handle("tx-1", SchemeRulesValidated())  # left the source: the deadline stays

    h.advance(1 * S)

    assert h.state() == "TooSlow"
    fired = [e for e in h.timeline if e.what == "fired"]
    assert len(fired) == 1 and f"{SOURCE}->Complete" in fired[0].detail


def test_a_deadline_already_past_fires_at_once(harness: HarnessFactory) -> None:
    conf = SEED + f"\nipf.flow.{FLOW}.processing-time.{SOURCE}.Complete.offset-id = accepted"
    h = _harness(harness, conf)

    h.domain.start(FLOW, "tx-1", offsets={"accepted": T0 - 10 * S})
    h.advance(0 * S)

    assert h.state() == "TooSlow"
