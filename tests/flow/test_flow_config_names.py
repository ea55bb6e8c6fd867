"""Configured keys must name flows, states and actions a registered flow has (near-misses named)."""

from __future__ import annotations

from dataclasses import dataclass

from flowsched.flow import Flow, FlowDefinition
from flowsched.flow.check import ConfiguredAction, ConfiguredProcessingTime, unknown_names


@dataclass(frozen=True)
class Done:
    pass


def _flows() -> dict[str, FlowDefinition]:
    flow = (
        Flow("OBCreditTransfer")
        .initial("ValidatingSchemeRules", invokes="ValidateAgainstSchemeRules")
        .state("CheckingFraud", invokes="CheckFraud")
        .terminal("Complete")
        .on(Done, in_state="CheckingFraud", go_to="Complete")
        .build()
    )
    return {flow.name: flow}


def _action(flow: str, state: str, action: str) -> ConfiguredAction:
    return ConfiguredAction(f"{flow}.{state}.{action}.timeout-duration", flow, state, action)


def _processing(flow: str, source: str, destination: str) -> ConfiguredProcessingTime:
    key = f"ipf.flow.{flow}.processing-time.{source}.{destination}.timeout-duration"
    return ConfiguredProcessingTime(key, flow, source, destination)


def test_keys_naming_what_exists_or_any_pass() -> None:
    keys = [
        _action("OBCreditTransfer", "CheckingFraud", "CheckFraud"),
        _action("Any", "CheckingFraud", "CheckFraud"),
        _action("Any", "Any", "ValidateAgainstSchemeRules"),
        _action("OBCreditTransfer", "Any", "Any"),
        _action("Any", "Any", "Any"),
    ]
    timing = [_processing("OBCreditTransfer", "ValidatingSchemeRules", "Complete")]

    assert unknown_names(_flows(), keys, timing) == []


def test_a_misspelt_state_is_reported_with_the_key_and_the_near_miss() -> None:
    problems = unknown_names(_flows(), [_action("Any", "CheckingFruad", "CheckFraud")], [])

    assert len(problems) == 1
    assert problems[0].startswith("Any.CheckingFruad.CheckFraud.timeout-duration: no state")
    assert "did you mean 'CheckingFraud'?" in problems[0]


def test_an_unknown_flow_is_reported() -> None:
    problems = unknown_names(_flows(), [_action("OBCreditTranfer", "Any", "Any")], [])

    assert len(problems) == 1 and "no flow 'OBCreditTranfer'" in problems[0]
    assert "did you mean 'OBCreditTransfer'?" in problems[0]


def test_an_action_the_named_state_does_not_invoke_is_reported() -> None:
    key = _action("OBCreditTransfer", "ValidatingSchemeRules", "CheckFraud")

    problems = unknown_names(_flows(), [key], [])

    assert len(problems) == 1
    assert (
        "no action 'CheckFraud' in flow 'OBCreditTransfer' in state 'ValidatingSchemeRules'"
        in (problems[0])
    )


def test_processing_time_keys_need_a_registered_flow_and_its_states() -> None:
    timing = [
        _processing("OBCreditTransfer", "ValidatingAgainstSchemeRules", "Complete"),
        _processing("OBCreditTransfer", "CheckingFraud", "Completed"),
        _processing("Payments", "A", "B"),
    ]

    problems = unknown_names(_flows(), [], timing)

    assert len(problems) == 3
    assert "no source state 'ValidatingAgainstSchemeRules'" in problems[0]
    assert "did you mean 'ValidatingSchemeRules'?" in problems[0]
    assert "no destination state 'Completed'" in problems[1]
    assert "no flow 'Payments'" in problems[2]


def test_a_terminal_source_can_never_be_left_and_is_reported() -> None:
    problems = unknown_names(
        _flows(), [], [_processing("OBCreditTransfer", "Complete", "CheckingFraud")]
    )

    assert len(problems) == 1 and "terminal" in problems[0]
