"""build() refuses action adapters that no registered flow can call: a misspelt action
(``CheckFruad``) or flow is named with the name meant, not left to a later "no adapter"."""

from __future__ import annotations

from typing import Any

import pytest
from flowkit import FLOW, T0, credit_transfer

from flowsched import InMemoryScheduler, ManualClock, SchedulingConfig
from flowsched.flow import FlowDefinitionError, FlowDomain


def nothing(request: Any) -> None:
    return None


def builder(**adapters: Any) -> Any:
    built = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(""))
        .with_scheduler_adapter(InMemoryScheduler(clock=ManualClock(T0)))
        .with_flow(credit_transfer())
    )
    for action, flow in adapters.items():
        built.with_action_adapter(action, nothing, flow=flow)
    return built


def test_a_misspelt_action_adapter_names_both_spellings() -> None:
    wired = builder(ValidateAgainstSchemeRules=None, CheckFruad=None)

    with pytest.raises(FlowDefinitionError) as caught:
        wired.build()

    message = str(caught.value)
    assert "the adapter for 'CheckFruad': no registered flow invokes action 'CheckFruad'" in message
    assert "did you mean 'CheckFraud'?" in message
    assert f"no action adapter for {FLOW}.CheckFraud" in message


def test_an_adapter_for_an_action_no_flow_has_is_refused() -> None:
    wired = builder(ValidateAgainstSchemeRules=None, CheckFraud=None, SendInvoice=None)

    stray = "no registered flow invokes action 'SendInvoice'"
    with pytest.raises(FlowDefinitionError, match=stray):
        wired.build()


def test_an_adapter_for_an_action_of_another_flow_is_refused() -> None:
    wired = builder(ValidateAgainstSchemeRules=None, CheckFraud=None)
    wired.with_action_adapter("CheckFraudd", nothing, flow=FLOW)

    with pytest.raises(
        FlowDefinitionError,
        match=rf"'{FLOW}.CheckFraudd': flow {FLOW} invokes no action 'CheckFraudd'; "
        r"did you mean 'CheckFraud'\?",
    ):
        wired.build()


def test_an_adapter_for_a_flow_that_is_not_registered_is_refused() -> None:
    wired = builder(ValidateAgainstSchemeRules=None, CheckFraud=None)
    wired.with_action_adapter("CheckFraud", nothing, flow="OBCreditTransferr")

    with pytest.raises(FlowDefinitionError, match=rf"did you mean flow='{FLOW}'\?"):
        wired.build()


def test_adapters_that_match_the_flows_build() -> None:
    wired = builder(ValidateAgainstSchemeRules=None)
    wired.with_action_adapter("CheckFraud", nothing, flow=FLOW)

    assert wired.build() is not None
