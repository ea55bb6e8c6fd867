"""Custom offsets may arrive on a later input: ``domain.handle(flow_id, event, offsets=...)``."""

from __future__ import annotations

from datetime import datetime

import pytest
from flowkit import FLOW, T0, HarnessFactory, S, SchemeRulesValidated

PT = f"ipf.flow.{FLOW}.processing-time.CheckingFraud.Complete"


def test_an_offset_given_with_an_event_is_used_by_the_deadline_that_event_arms(
    harness: HarnessFactory,
) -> None:
    h = harness(f"{PT}.timeout-duration = 10s\n{PT}.offset-id = accepted")
    h.domain.start(FLOW, "tx-1")
    h.advance(4 * S)
    accepted = T0 - 2 * S  # known only when the scheme rules answered

    instance = h.domain.handle("tx-1", SchemeRulesValidated(), offsets={"accepted": accepted})

    assert instance.state == "CheckingFraud"
    assert instance.offsets["accepted"] == accepted
    assert instance.deadlines[0].due == accepted + 10 * S
    h.advance(4 * S)  # T0 + 8 s: the deadline (T0 + 8 s) passes
    assert h.state() == "TooSlow"


def test_an_offset_given_with_an_event_is_kept_even_without_a_transition(
    harness: HarnessFactory,
) -> None:
    h = harness("")
    h.domain.start(FLOW, "tx-1", offsets={"accepted": T0})
    later = T0 + 1 * S

    instance = h.domain.handle("tx-1", object(), offsets={"accepted": later, "booked": later})

    assert instance.state == "ValidatingSchemeRules"
    assert dict(instance.offsets) == {
        "accepted": later,
        "booked": later,
        "ValidatingSchemeRules": T0,
    }
    stored = h.domain.instance("tx-1")
    assert stored is not None and stored.offsets["booked"] == later


def test_a_naive_offset_on_an_event_is_refused(harness: HarnessFactory) -> None:
    h = harness("")
    h.domain.start(FLOW, "tx-1")

    with pytest.raises(ValueError, match="offset 'accepted'"):
        h.domain.handle("tx-1", SchemeRulesValidated(), offsets={"accepted": datetime(2026, 1, 5)})

    assert h.state() == "ValidatingSchemeRules"
