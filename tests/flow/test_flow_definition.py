"""Flow definitions are checked when built, and match events as declared."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from flowsched.flow import (
    ANY_STATE,
    ActionTimeoutEvent,
    Flow,
    FlowDefinitionError,
    ProcessingTimeElapsedEvent,
)


@dataclass(frozen=True)
class Validated:
    pass


@dataclass(frozen=True)
class FraudResult:
    passed: bool


def _flow() -> Flow:
    return (
        Flow("OBCreditTransfer")
        .initial("ValidatingSchemeRules", invokes="ValidateAgainstSchemeRules")
        .state("CheckingFraud", invokes=["CheckFraud"])
        .terminal("Complete", "Rejected", "FraudTimedOut", "TooSlow")
        .response(Validated, to="ValidateAgainstSchemeRules")
        .response(FraudResult, to="CheckFraud")
        .on(Validated, in_state="ValidatingSchemeRules", go_to="CheckingFraud")
        .on(FraudResult, in_state="CheckingFraud", go_to="Complete", when=lambda e: e.passed)
        .on(FraudResult, in_state="CheckingFraud", go_to="Rejected")
        .on(
            ActionTimeoutEvent, in_state="CheckingFraud", action="CheckFraud", go_to="FraudTimedOut"
        )
        .on(ProcessingTimeElapsedEvent, in_state=ANY_STATE, destination="Complete", go_to="TooSlow")
    )


def test_a_consistent_flow_builds_with_its_initial_state_and_actions() -> None:
    definition = _flow().build()

    assert definition.initial == "ValidatingSchemeRules"
    assert definition.actions == {"ValidateAgainstSchemeRules", "CheckFraud"}
    assert definition.state("Complete").terminal


def test_the_first_matching_transition_wins_and_guards_choose() -> None:
    definition = _flow().build()

    passed = definition.transition_for("CheckingFraud", FraudResult(passed=True))
    failed = definition.transition_for("CheckingFraud", FraudResult(passed=False))

    assert passed is not None and passed.target == "Complete"
    assert failed is not None and failed.target == "Rejected"


def test_a_timeout_event_matches_only_its_action_and_state() -> None:
    definition = _flow().build()

    def timeout(state: str, action: str) -> ActionTimeoutEvent:
        return ActionTimeoutEvent("tx-1", "OBCreditTransfer", state, action)

    hit = definition.transition_for("CheckingFraud", timeout("CheckingFraud", "CheckFraud"))
    assert hit is not None and hit.target == "FraudTimedOut"
    assert definition.transition_for("CheckingFraud", timeout("CheckingFraud", "Other")) is None
    assert definition.transition_for("ValidatingSchemeRules", timeout("X", "CheckFraud")) is None


def test_any_state_transitions_apply_in_every_state_with_the_destination_filter() -> None:
    definition = _flow().build()
    elapsed = ProcessingTimeElapsedEvent(
        "tx-1", "OBCreditTransfer", "ValidatingSchemeRules", "Complete"
    )
    other = ProcessingTimeElapsedEvent(
        "tx-1", "OBCreditTransfer", "ValidatingSchemeRules", "Rejected"
    )

    for state in ("ValidatingSchemeRules", "CheckingFraud"):
        found = definition.transition_for(state, elapsed)
        assert found is not None and found.target == "TooSlow"
    assert definition.transition_for("CheckingFraud", other) is None


def test_a_response_is_found_by_its_type() -> None:
    definition = _flow().build()

    response = definition.response_for(FraudResult(passed=False))

    assert response is not None and response.action == "CheckFraud" and response.completing
    assert definition.response_for(object()) is None


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (
            lambda f: f.on(Validated, in_state="Nowhere", go_to="Complete"),
            "unknown state 'Nowhere'",
        ),
        (
            lambda f: f.on(Validated, in_state="CheckingFraud", go_to="Limbo"),
            "unknown state 'Limbo'",
        ),
        (lambda f: f.on(Validated, in_state="Complete", go_to="CheckingFraud"), "terminal state"),
        (lambda f: f.response(Validated, to="CheckFruad"), "unknown action 'CheckFruad'"),
        (lambda f: f.initial("Again"), "exactly one initial state"),
        (lambda f: f.state("CheckingFraud"), "declared twice"),
        (lambda f: f.state("Bad.Name"), "without '.'"),
    ],
)
def test_an_inconsistent_flow_is_refused_naming_the_problem(broken, message) -> None:
    with pytest.raises(FlowDefinitionError, match=message):
        broken(_flow()).build()


def test_a_flow_without_initial_state_is_refused() -> None:
    with pytest.raises(FlowDefinitionError, match="exactly one initial state"):
        Flow("Empty").state("A").build()


@pytest.mark.parametrize(
    ("name", "why"), [("X" * 200, "the limit is"), ("a\tb", "control character")]
)
def test_a_flow_name_that_cannot_name_its_handler_is_refused(name: str, why: str) -> None:
    with pytest.raises(FlowDefinitionError, match=f"cannot name its timers' handler: .*{why}"):
        Flow(name)
