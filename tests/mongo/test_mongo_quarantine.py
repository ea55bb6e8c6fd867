"""A malformed document is moved to ``<name>_quarantine`` with the reason; the sweep goes on."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from flowsched.port import ScheduleItem, ScheduleKind


def insert_raw(collection, clock, **fields: object) -> None:
    now = clock.now()
    doc: dict[str, object] = {
        "bucket": 0,
        "kind": "TIMER",
        "due": now,
        "ready_at": now,
        "generation": 1,
        "attempts": 0,
        "deliveries": 0,
        "claim": None,
    }
    doc.update(fields)
    doc.setdefault("route", f"k:{doc['kind']}")  # as this version stores it
    collection.insert_one({k: v for k, v in doc.items() if v is not ...})


@pytest.fixture(params=["mongomock", "wire"])
def store(request, collection):
    """The collection under test: mongomock, and the wire server when there is one."""
    if request.param == "mongomock":
        return collection
    return request.getfixturevalue("mongo_db")["timers"]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"_id": "no-due", "due": ...}, "due must be a date"),
        ({"_id": "str-due", "due": "tomorrow"}, "due must be a date"),
        ({"_id": "no-gen", "generation": ...}, "generation must be an integer"),
        # Unhashable: the claim's fence is a set of generations; every claim failed.
        ({"_id": "dict-gen", "generation": {"a": 1}}, "generation must be an integer"),
        ({"_id": "list-gen", "generation": [1]}, "generation must be an integer"),
        ({"_id": "fat", "payload": {"blob": "x" * 5000}}, "payload is 5011 bytes"),
        ({"_id": "listy", "payload": [1, 2]}, "payload must be a JSON object"),
        ({"_id": 12345}, "_id must be a non-empty string"),
        ({"_id": "odd-count", "deliveries": "two"}, "deliveries must be an integer >= 0"),
        ({"_id": "null-count", "deliveries": None}, "deliveries must be an integer >= 0"),
    ],
)
def test_malformed_document_is_quarantined_and_valid_ones_still_fire(
    make, clock, store, fields, reason
):
    collection = store
    scheduler = make(collection=collection)
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    scheduler.schedule(ScheduleItem("good-1", ScheduleKind.TIMER, clock.now()))
    insert_raw(collection, clock, **fields)
    scheduler.schedule(ScheduleItem("good-2", ScheduleKind.TIMER, clock.now()))

    assert scheduler.run_due() == 2
    assert sorted(fired) == ["good-1", "good-2"]
    assert collection.count_documents({}) == 0
    (record,) = collection.database["timers_quarantine"].find()
    assert record["item_id"] == fields["_id"]
    assert reason in record["reason"]
    assert record["document"]["_id"] == fields["_id"]
    assert record["node"] == scheduler.node_id
    assert isinstance(record["quarantined_at"], datetime)


def test_get_reads_a_malformed_document_as_none(make, clock, collection):
    scheduler = make()
    insert_raw(collection, clock, _id="bad", due="soon")
    assert scheduler.get("bad") is None
    assert scheduler.exists("bad")  # still there until a sweep quarantines it


def test_unknown_kinds_are_left_alone_not_quarantined(make, clock, collection):
    scheduler = make()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    insert_raw(collection, clock, _id="future-kind", kind="SOMETHING_NEW")
    clock.advance(timedelta(seconds=1))
    assert scheduler.run_due() == 0
    assert scheduler.exists("future-kind")
    assert collection.database["timers_quarantine"].count_documents({}) == 0
