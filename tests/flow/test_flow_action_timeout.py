"""An action with no completing response in time sends the flow an ActionTimeoutEvent."""

from __future__ import annotations

from flowkit import FLOW, T0, HarnessFactory, S, SchemeRulesValidated

from flowsched.flow import ActionTimeoutEvent, Flow

VALIDATED = {"ValidateAgainstSchemeRules": SchemeRulesValidated()}
TIMEOUT_20S = "Any.CheckingFraud.CheckFraud.timeout-duration = 20s"


def test_the_timeout_moves_the_flow_to_its_timeout_state(harness: HarnessFactory) -> None:
    h = harness(TIMEOUT_20S, respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")

    h.advance(19 * S)
    assert h.state() == "CheckingFraud"
    h.advance(1 * S)

    assert h.state() == "FraudTimedOut"
    instance = h.domain.instance("tx-1")
    assert instance is not None and instance.finished


def test_the_event_says_which_action_state_deadline_and_key(harness: HarnessFactory) -> None:
    seen: list[ActionTimeoutEvent] = []

    def remember(event: ActionTimeoutEvent) -> bool:
        seen.append(event)
        return True

    flow = (
        Flow(FLOW)
        .initial("CheckingFraud", invokes="CheckFraud")
        .terminal("FraudTimedOut")
        .on(ActionTimeoutEvent, in_state="CheckingFraud", go_to="FraudTimedOut", when=remember)
    )
    h = harness(TIMEOUT_20S, flows=(flow,))
    h.domain.start(FLOW, "tx-1")

    h.advance(20 * S)

    assert len(seen) == 1
    event = seen[0]
    assert (event.flow_id, event.flow, event.state, event.action) == (
        "tx-1",
        FLOW,
        "CheckingFraud",
        "CheckFraud",
    )
    assert event.deadline == T0 + 20 * S and event.fired_at == T0 + 20 * S
    assert event.attempts == 1
    assert event.config_key == "Any.CheckingFraud.CheckFraud.timeout-duration"


def test_a_timeout_with_no_transition_leaves_the_flow_where_it_is(harness: HarnessFactory) -> None:
    conf = "Any.Any.ValidateAgainstSchemeRules.timeout-duration = 2s"
    flow = (
        Flow(FLOW)
        .initial("ValidatingSchemeRules", invokes="ValidateAgainstSchemeRules")
        .terminal("Complete")
        .on(SchemeRulesValidated, in_state="ValidatingSchemeRules", go_to="Complete")
    )
    h = harness(conf, flows=(flow,))
    h.domain.start(FLOW, "tx-1")

    h.advance(5 * S)

    assert h.state() == "ValidatingSchemeRules"
    assert any("no transition" in e.detail for e in h.timeline)
    h.domain.handle("tx-1", SchemeRulesValidated())
    assert h.state() == "Complete"


def test_no_configured_timeout_means_the_action_waits_forever(harness: HarnessFactory) -> None:
    h = harness("", respond=VALIDATED)
    h.domain.start(FLOW, "tx-1")

    h.advance(3600 * 24 * S)

    assert h.state() == "CheckingFraud"
    assert h.attempts("CheckFraud") == [0 * S]
