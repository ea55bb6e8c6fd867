"""Configured keys must name flows, states and actions a registered flow has (near-misses named)."""

from __future__ import annotations

from dataclasses import dataclass

from flowsched import SchedulingConfig
from flowsched.errors import ConfigProblem
from flowsched.flow import Flow, FlowDefinition
from flowsched.flow.check import unknown_names


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


def _problems(conf: str) -> list[ConfigProblem]:
    config = SchedulingConfig.from_string(conf)
    return unknown_names(_flows(), config.action_keys(), config.processing_time_keys())


PT = "ipf.flow.OBCreditTransfer.processing-time"


def test_keys_naming_what_exists_or_any_pass() -> None:
    conf = f"""
    OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration = 1s
    Any.CheckingFraud.CheckFraud.max-retries = 1
    Any.Any.ValidateAgainstSchemeRules.timeout-duration = 2s
    ipf.flow.OBCreditTransfer.Any.Any.jitter-enabled = false
    Any.Any.Any.timeout-duration = 3s
    {PT}.ValidatingSchemeRules.Complete.timeout-duration = 2s
    """

    assert _problems(conf) == []


def test_a_misspelt_state_is_reported_with_the_key_the_near_miss_and_a_suggestion() -> None:
    problems = _problems("Any.CheckingFruad.CheckFraud.timeout-duration = 20s")

    assert len(problems) == 1
    problem = problems[0]
    assert problem.key == "Any.CheckingFruad.CheckFraud.timeout-duration"
    assert "no state 'CheckingFruad' in any registered flow" in problem.message
    assert "did you mean 'CheckingFraud'?" in problem.message
    assert problem.suggestion == "Any.CheckingFraud.CheckFraud.timeout-duration"


def test_an_unknown_flow_is_reported_in_either_key_form() -> None:
    problems = _problems("ipf.flow.OBCreditTranfer.Any.Any.max-retries = 1")

    assert len(problems) == 1
    assert "no flow 'OBCreditTranfer'" in problems[0].message
    assert problems[0].suggestion == "ipf.flow.OBCreditTransfer.Any.Any.max-retries"


def test_an_action_the_named_state_does_not_invoke_is_reported() -> None:
    problems = _problems("OBCreditTransfer.ValidatingSchemeRules.CheckFraud.max-retries = 1")

    assert len(problems) == 1
    assert (
        "no action 'CheckFraud' in flow 'OBCreditTransfer' in state 'ValidatingSchemeRules'"
        in problems[0].message
    )


def test_processing_time_keys_need_a_registered_flow_and_its_states() -> None:
    conf = f"""
    {PT}.ValidatingAgainstSchemeRules.Complete.timeout-duration = 2s
    {PT}.CheckingFraud.Completed.timeout-duration = 2s
    ipf.flow.Payments.processing-time.A.B.timeout-duration = 2s
    """

    problems = _problems(conf)

    assert [p.message.split(" (")[0] for p in problems] == [
        "no source state 'ValidatingAgainstSchemeRules' in flow 'OBCreditTransfer'",
        "no destination state 'Completed' in flow 'OBCreditTransfer'",
        "no flow 'Payments'",
    ]
    assert problems[0].suggestion == f"{PT}.ValidatingSchemeRules.Complete.timeout-duration"


def test_a_terminal_source_can_never_be_left_and_is_reported() -> None:
    problems = _problems(f"{PT}.Complete.CheckingFraud.timeout-duration = 2s")

    assert len(problems) == 1 and "terminal" in problems[0].message


def test_other_libraries_root_keys_shaped_like_action_keys_are_ignored() -> None:
    conf = """
    alpakka.s3.retry-settings { max-retries = 3, min-backoff = 200ms, max-backoff = 10s }
    my-http.client.pool.timeout-duration = 5s
    OBCreditTransfer.CheckingFraud.CheckFraud.max-retries = 1
    """

    assert _problems(conf) == []


def test_a_root_key_whose_flow_is_close_to_a_registered_one_is_still_reported() -> None:
    for flow in ("OBCreditTranfer", "obcredittransfer"):
        problems = _problems(f"{flow}.CheckingFraud.CheckFraud.max-retries = 1")

        assert len(problems) == 1
        assert f"no flow '{flow}'" in problems[0].message


def test_a_root_key_for_a_registered_or_any_flow_is_checked_in_full() -> None:
    problems = _problems(
        """
        OBCreditTransfer.CheckingFruad.CheckFraud.max-retries = 1
        Any.Any.CheckFruad.max-retries = 1
        """
    )

    assert [p.message.split(" (")[0] for p in problems] == [
        "no state 'CheckingFruad' in flow 'OBCreditTransfer'",
        "no action 'CheckFruad' in any registered flow",
    ]


def test_under_ipf_flow_an_unknown_flow_is_always_reported() -> None:
    problems = _problems("ipf.flow.alpakka.s3.retry-settings.max-retries = 3")

    assert len(problems) == 1 and "no flow 'alpakka'" in problems[0].message
