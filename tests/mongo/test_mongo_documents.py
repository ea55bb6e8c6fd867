"""What a scheduled item looks like in MongoDB, and how it is read back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched.mongo.documents import MalformedDocument, stored_item, truncate_ms
from flowsched.port import ScheduleItem, ScheduleKind


def item(item_id: str = "t-1", **fields: object) -> ScheduleItem:
    fields.setdefault("due", datetime(2026, 3, 1, 12, 0, 1, 123456, tzinfo=UTC))
    return ScheduleItem(item_id, ScheduleKind.TIMER, **fields)  # type: ignore[arg-type]


def test_document_holds_the_documented_fields(make, collection):
    scheduler = make()
    scheduler.schedule(item(flow_id="flow-7", payload={"order": "o-1", "n": 3}))
    doc = collection.find_one({"_id": "t-1"})
    # stored_at: every form a MongoDB timer store writes carries it (the late-write fence,
    # docs/guides/timer-stores.md), on a ManualClock too.
    assert set(doc) == {
        "_id", "bucket", "kind", "route", "due", "flow_id", "payload", "generation",
        "attempts", "deliveries", "last_error", "ready_at", "claim", "stored_at",
    }  # fmt: skip
    assert isinstance(doc["stored_at"], datetime)
    assert doc["kind"] == "TIMER"
    assert doc["route"] == "k:TIMER"
    assert doc["flow_id"] == "flow-7"
    assert doc["payload"] == {"order": "o-1", "n": 3}  # a plain sub-document, not bytes
    assert isinstance(doc["generation"], int) and 0 < doc["generation"] < 2**63
    counters = (doc["attempts"], doc["deliveries"], doc["last_error"], doc["claim"])
    assert counters == (0, 0, None, None)
    assert doc["ready_at"] == doc["due"]


def test_an_item_for_a_named_handler_stores_its_name_and_route(make, collection):
    scheduler = make()
    stored = scheduler.schedule(item(handler="send-reminder"))
    doc = collection.find_one({"_id": "t-1"})
    assert (doc["handler"], doc["route"]) == ("send-reminder", "h:send-reminder")
    assert scheduler.get("t-1") == stored
    assert stored.handler == "send-reminder"


def test_a_route_that_disagrees_with_handler_and_kind_is_malformed():
    with pytest.raises(MalformedDocument, match=r"route 'h:other' does not match.*'h:mine'"):
        stored_item(good_doc(handler="mine", route="h:other"))
    with pytest.raises(MalformedDocument, match="handler name"):
        stored_item(good_doc(handler="", route="h:"))
    assert stored_item(good_doc(route="k:TIMER")).item.route == "k:TIMER"


def test_due_is_cut_to_milliseconds_and_returned_that_way(make):
    scheduler = make()
    stored = scheduler.schedule(item())
    assert stored.due == datetime(2026, 3, 1, 12, 0, 1, 123000, tzinfo=UTC)
    assert scheduler.get("t-1") == stored
    assert scheduler.get("t-1").due.tzinfo is not None


def test_every_schedule_gets_a_new_generation_and_replaces_the_document(make, collection):
    scheduler = make()
    first = scheduler.schedule(item())
    second = scheduler.schedule(item(due=datetime(2026, 3, 2, tzinfo=UTC)))
    assert first.generation != second.generation
    assert collection.count_documents({}) == 1
    assert scheduler.get("t-1").generation == second.generation
    assert scheduler.get("t-1").due == datetime(2026, 3, 2, tzinfo=UTC)


def test_rescheduling_clears_claim_attempts_and_error(make, collection):
    scheduler = make()
    scheduler.schedule(item())
    claim = {"owner": "other", "token": "x", "lease_until": datetime(2030, 1, 1)}
    collection.update_one(
        {"_id": "t-1"},
        {"$set": {"claim": claim, "attempts": 4, "deliveries": 5, "last_error": "boom"}},
    )
    scheduler.schedule(item())
    doc = collection.find_one({"_id": "t-1"})
    assert (doc["claim"], doc["attempts"], doc["deliveries"], doc["last_error"]) == (
        None, 0, 0, None,
    )  # fmt: skip


def test_payload_beyond_bson_integers_is_refused_before_writing(make, collection):
    scheduler = make()
    with pytest.raises(ValueError, match=r"'big'.*cannot be stored in MongoDB"):
        scheduler.schedule(item("big", payload={"n": 2**70}))
    assert collection.count_documents({}) == 0


def test_indexes_are_created_on_first_use_and_again_harmlessly(make, collection):
    make().exists("nothing")
    make().exists("nothing")
    indexes = {name: info["key"] for name, info in collection.index_information().items()}
    assert indexes["claim_by_route_bucket"] == [("route", 1), ("bucket", 1), ("ready_at", 1)]
    assert "claim" not in indexes  # the (kind, ready_at) index of versions before routing
    assert indexes["flow_id_sparse"] == [("flow_id", 1)]
    assert "flow_id" not in indexes  # the full index of earlier versions


def test_an_item_without_a_flow_stores_no_flow_id(make, collection):
    # The flow_id index is sparse: such an item costs no entry in it.
    make().schedule(item())
    doc = collection.find_one({"_id": "t-1"})
    assert "flow_id" not in doc
    assert make().get("t-1").flow_id is None


def test_the_full_flow_id_index_of_earlier_versions_is_dropped(make, collection):
    collection.create_index([("flow_id", 1)], name="flow_id")
    make().exists("nothing")
    assert "flow_id" not in collection.index_information()


def test_truncate_ms_floors_like_bson():
    when = datetime(2026, 1, 1, 0, 0, 0, 999999, tzinfo=UTC)
    assert truncate_ms(when) == datetime(2026, 1, 1, 0, 0, 0, 999000, tzinfo=UTC)
    assert truncate_ms(datetime(2026, 1, 1)).tzinfo is UTC  # naive BSON dates are UTC


def good_doc(**changes: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "_id": "t-1",
        "kind": "TIMER",
        "due": datetime(2026, 1, 1),
        "flow_id": None,
        "payload": {"a": 1},
        "generation": 42,
        "attempts": 1,
        "deliveries": 2,
    }
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not ...}


def test_reading_back_rebuilds_the_item_with_counters():
    stored = stored_item(good_doc())
    assert stored.item.due == datetime(2026, 1, 1, tzinfo=UTC)
    assert (stored.item.generation, stored.attempts, stored.deliveries) == (42, 1, 2)
    # One delivery marked started was never settled: its node died mid-handler.
    assert stored.lost() == 1
    assert stored_item(good_doc(deliveries=4)).lost() == 3
    assert stored_item(good_doc(deliveries=1)).lost() == 0


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"_id": 7}, "_id must be a non-empty string"),
        ({"kind": "NAP"}, "kind 'NAP' is not one of"),
        ({"due": ...}, "due must be a date, got None"),
        ({"due": "2026-01-01"}, "due must be a date"),
        ({"generation": "1"}, "generation must be an integer"),
        ({"flow_id": 3}, "flow_id must be a string or null"),
        ({"payload": ["a"]}, "payload must be a JSON object"),
        ({"payload": {"blob": "x" * 2000}}, "payload is 2011 bytes"),
        ({"payload": {"at": datetime(2026, 1, 1)}}, "JSON-serialisable"),
        ({"attempts": -1}, "attempts must be an integer >= 0"),
        ({"attempts": 2**63 - 1}, "attempts must be an integer >= 0 and <= 1000000000"),
        ({"deliveries": 2**31}, "deliveries must be an integer >= 0 and <= 1000000000"),
    ],
)
def test_malformed_documents_are_refused_with_the_reason(changes, reason):
    with pytest.raises(MalformedDocument, match=reason):
        stored_item(good_doc(**changes))


def test_due_moves_on_redelivery_and_get_shows_it(make, clock):
    scheduler = make()

    def fail(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("not yet")

    scheduler.subscribe(ScheduleKind.TIMER, fail)
    scheduler.schedule(item(due=clock.now()))
    scheduler.run_due()
    assert scheduler.get("t-1").due == clock.now() + timedelta(seconds=3)
