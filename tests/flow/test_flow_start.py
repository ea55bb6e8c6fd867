"""Starting an instance: initial state, custom offsets and data, one instance per id."""

from __future__ import annotations

from datetime import datetime

import pytest
from flowkit import FLOW, T0, HarnessFactory, S

from flowsched.flow import FlowAlreadyExistsError, UnknownFlowError


def test_a_started_instance_is_in_the_initial_state_with_its_entry_offset(
    harness: HarnessFactory,
) -> None:
    h = harness("")

    instance = h.domain.start(FLOW, "tx-1", offsets={"AcceptedAt": T0 - 5 * S}, data={"id": 7})

    assert instance.state == "ValidatingSchemeRules" and instance.version == 1
    assert instance.offsets == {"AcceptedAt": T0 - 5 * S, "ValidatingSchemeRules": T0}
    assert h.calls[0].request.data == {"id": 7}
    assert h.calls[0].request.offsets == instance.offsets


def test_an_id_can_be_started_once(harness: HarnessFactory) -> None:
    h = harness("")
    h.domain.start(FLOW, "tx-1")

    with pytest.raises(FlowAlreadyExistsError, match="tx-1"):
        h.domain.start(FLOW, "tx-1")


def test_unknown_flows_and_instances_are_named(harness: HarnessFactory) -> None:
    h = harness("")

    with pytest.raises(UnknownFlowError, match="no flow 'Payments' registered"):
        h.domain.start("Payments", "tx-1")
    with pytest.raises(UnknownFlowError, match="no flow instance 'tx-9'"):
        h.domain.handle("tx-9", object())


def test_data_must_be_json_and_offsets_aware_datetimes(harness: HarnessFactory) -> None:
    h = harness("")

    with pytest.raises(ValueError, match="data of flow instance 'tx-1' must be JSON"):
        h.domain.start(FLOW, "tx-1", data={"when": T0})
    with pytest.raises(ValueError, match="offset 'AcceptedAt' must be timezone-aware"):
        h.domain.start(FLOW, "tx-1", offsets={"AcceptedAt": datetime(2026, 1, 1)})
    assert h.domain.instance("tx-1") is None
