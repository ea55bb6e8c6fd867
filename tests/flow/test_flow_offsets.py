"""Deadlines count from an offset: a custom one given on start, a state's entry, a parent's map."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import pytest
from flowkit import FLOW, T0, Harness, HarnessFactory, S, SchemeRulesValidated

from flowsched.flow import ActionRequest, Flow, FlowDomain, ProcessingTimeElapsedEvent

PT = f"ipf.flow.{FLOW}.processing-time.ValidatingSchemeRules.Complete"


def _deadline(h: Harness, flow_id: str = "tx-1") -> datetime:
    instance = h.domain.instance(flow_id)
    assert instance is not None and len(instance.deadlines) == 1
    return instance.deadlines[0].due


def test_a_custom_offset_moves_the_deadline_to_accepted_plus_5s(harness: HarnessFactory) -> None:
    conf = f"{PT}.timeout-duration = 5s\n{PT}.offset-id = accepted"
    h = harness(conf)
    accepted = T0 - 3 * S  # the client accepted the payment 3 s before the flow started

    h.domain.start(FLOW, "tx-1", offsets={"accepted": accepted})

    assert _deadline(h) == accepted + 5 * S
    h.advance(1 * S)
    assert h.state() == "ValidatingSchemeRules"
    h.advance(1 * S)
    assert h.state() == "TooSlow"


def test_a_state_entry_is_an_offset_under_the_state_name(harness: HarnessFactory) -> None:
    pt = f"ipf.flow.{FLOW}.processing-time.CheckingFraud.Complete"
    conf = f"{pt}.timeout-duration = 10s\n{pt}.offset-id = ValidatingSchemeRules"
    h = harness(conf)
    h.domain.start(FLOW, "tx-1")
    h.advance(4 * S)

    h.domain.handle("tx-1", SchemeRulesValidated())  # CheckingFraud entered at T0 + 4 s

    instance = h.domain.instance("tx-1")
    assert instance is not None
    assert instance.offsets == {"ValidatingSchemeRules": T0, "CheckingFraud": T0 + 4 * S}
    assert _deadline(h) == T0 + 10 * S  # from ValidatingSchemeRules' entry, not CheckingFraud's


def test_an_unknown_offset_id_falls_back_to_the_entry_time_with_a_warning(
    harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    conf = f"{PT}.timeout-duration = 5s\n{PT}.offset-id = acepted"
    h = harness(conf)

    with caplog.at_level(logging.WARNING, logger="flowsched.flow"):
        h.domain.start(FLOW, "tx-1", offsets={"accepted": T0 - 3 * S})

    assert _deadline(h) == T0 + 5 * S
    assert "offset-id 'acepted'" in caplog.text and "accepted" in caplog.text


@dataclass(frozen=True)
class Go:
    pass


def test_a_parent_hands_its_offsets_to_a_child(harness: HarnessFactory) -> None:
    parent = (
        Flow("Parent")
        .initial("Receiving")
        .state("Spawning", invokes="StartChild")
        .terminal("Done")
        .on(Go, in_state="Receiving", go_to="Spawning")
        .on(Go, in_state="Spawning", go_to="Done")
    )
    child = (
        Flow("Child")
        .initial("Working", invokes="Work")
        .terminal("Finished", "Late")
        .on(Go, in_state="Working", go_to="Finished")
        .on(ProcessingTimeElapsedEvent, in_state="Working", go_to="Late")
    )
    conf = """
    ipf.flow.Child.processing-time.Working.Finished.timeout-duration = 5s
    ipf.flow.Child.processing-time.Working.Finished.offset-id = accepted
    """
    domains: list[FlowDomain] = []

    def start_child(request: ActionRequest) -> None:
        domains[0].start("Child", f"{request.flow_id}-child", offsets=request.offsets)

    h = harness(conf, flows=(parent, child), adapters={"StartChild": start_child})
    domains.append(h.domain)
    accepted = T0 - 1 * S
    h.domain.start("Parent", "p-1", offsets={"accepted": accepted})
    h.advance(3 * S)

    h.domain.handle("p-1", Go())  # Spawning at T0 + 3 s starts the child

    child_instance = h.domain.instance("p-1-child")
    assert child_instance is not None
    assert child_instance.offsets == {
        "accepted": accepted,
        "Receiving": T0,
        "Spawning": T0 + 3 * S,
        "Working": T0 + 3 * S,
    }
    assert _deadline(h, "p-1-child") == accepted + 5 * S  # T0 + 4 s, not T0 + 8 s
    h.advance(1 * S)
    assert h.state("p-1-child") == "Late"
    assert h.state("p-1") == "Spawning"
