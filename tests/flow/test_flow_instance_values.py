"""FlowInstance values: the compact offsets map, unvalidated copies, the in-memory store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import MappingProxyType

import pytest

from flowsched.flow import FlowInstance, InMemoryFlowStore
from flowsched.flow.instance import Offsets

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def test_offsets_behave_as_a_read_only_mapping() -> None:
    offsets = Offsets([("accepted", T0), ("Checking", T0 + S)])
    assert offsets == {"accepted": T0, "Checking": T0 + S}
    assert dict(offsets) == {"accepted": T0, "Checking": T0 + S}  # dict on either side
    assert offsets == MappingProxyType({"Checking": T0 + S, "accepted": T0})
    assert list(offsets) == ["accepted", "Checking"] and len(offsets) == 2
    assert offsets.get("missing") is None and "accepted" in offsets
    with pytest.raises(KeyError, match="missing"):
        offsets["missing"]
    with pytest.raises(TypeError):
        offsets["accepted"] = T0  # type: ignore[index]


def test_with_time_moves_an_offset_in_place_or_adds_it_last() -> None:
    offsets = Offsets([("accepted", T0), ("Checking", T0 + S)])
    moved = offsets.with_time("accepted", T0 + 5 * S)
    assert list(moved.items()) == [("accepted", T0 + 5 * S), ("Checking", T0 + S)]
    added = offsets.with_time("Complete", T0 + 9 * S)
    assert list(added) == ["accepted", "Checking", "Complete"]
    assert offsets == {"accepted": T0, "Checking": T0 + S}  # unchanged


def instance(**changes: object) -> FlowInstance:
    fields: dict[str, object] = {
        "flow_id": "tx-1",
        "flow": "F",
        "state": "A",
        "entry": 1,
        "entered_at": T0,
        "offsets": {"A": T0},
    }
    return FlowInstance(**{**fields, **changes})  # type: ignore[arg-type]


def test_evolve_changes_the_named_fields_and_keeps_the_rest() -> None:
    before = instance(data={"k": 1})
    after = before.evolve(state="B", entry=2, version=3)
    assert (after.state, after.entry, after.version) == ("B", 2, 3)
    assert (after.flow_id, after.offsets, after.data) == ("tx-1", {"A": T0}, {"k": 1})
    assert (before.state, before.version) == ("A", 0)


def test_the_document_round_trip_keeps_offsets_in_order() -> None:
    original = instance(offsets={"accepted": T0 - S, "A": T0})
    again = FlowInstance.from_document(original.to_document())
    assert again == original and list(again.offsets) == ["accepted", "A"]


def test_the_in_memory_store_hands_back_the_stored_immutable_instance() -> None:
    store = InMemoryFlowStore()
    stored = store.insert(instance())
    assert stored.version == 1 and store.load("tx-1") is stored
    updated = store.update(stored.evolve(state="B"))
    assert store.load("tx-1") is updated and updated.version == 2
    assert stored.state == "A"  # what was handed out before never changes
