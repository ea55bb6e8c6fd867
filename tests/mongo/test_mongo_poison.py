"""Poison documents: whatever is in the collection, the sweep goes on, good timers fire, and
every unusable document is moved to ``<name>_quarantine`` once, with the reason."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import bson
import pytest

from flowsched.mongo import MongoTimerStore
from flowsched.mongo.documents import MAX_COUNT, bucket_of
from flowsched.mongo.quarantine import AUDIT_EVERY, Audit, Quarantiner
from flowsched.mongo.store import TimerStore
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


@pytest.fixture(params=["mongomock", "wire"])
def store(request, collection):
    """The collection under test: mongomock, and the wire server when there is one."""
    if request.param == "mongomock":
        return collection
    return request.getfixturevalue("mongo_db")["timers"]


def raw(clock, **fields: Any) -> dict[str, Any]:
    now = clock.now()
    doc: dict[str, Any] = {
        "bucket": 0,
        "kind": "TIMER",
        "route": "k:TIMER",
        "due": now,
        "ready_at": now,
        "generation": 1,
        "attempts": 0,
        "deliveries": 0,
        "claim": None,
    }
    doc.update(fields)
    return {k: v for k, v in doc.items() if v is not ...}


def quarantined(collection) -> dict[Any, str]:
    return {
        repr(r["item_id"]): r["reason"]
        for r in collection.database[f"{collection.name}_quarantine"].find()
    }


POISON = {
    "int64 deliveries": ({"_id": "max", "deliveries": 2**63 - 1}, "deliveries must be"),
    "capped deliveries": ({"_id": "cap", "deliveries": MAX_COUNT}, "deliveries must be"),
    "float deliveries": ({"_id": "float", "deliveries": 1.5}, "deliveries must be"),
    "int64 attempts": ({"_id": "att", "attempts": 2**63 - 1}, "attempts must be"),
    "sub-document _id": ({"_id": {"a": 1}}, "_id must be a non-empty string"),
    "number _id": ({"_id": 7}, "_id must be a non-empty string"),
    "no due": ({"_id": "no-due", "due": ...}, "due must be a date"),
    "no kind": ({"_id": "no-kind", "kind": ...}, "kind must be a string"),
    "number kind": ({"_id": "num-kind", "kind": 3}, "kind must be a string"),
    "no ready_at": ({"_id": "no-ready", "ready_at": ...}, "ready_at must be a date"),
    "text ready_at": ({"_id": "text-ready", "ready_at": "now"}, "ready_at must be a date"),
    "huge generation": ({"_id": "gen", "generation": 2.5}, "generation must be an integer"),
    "bad recurrence": ({"_id": "rec", "recurrence": {"every": "x"}}, "recurrence"),
    "endless recurrence": ({"_id": "rec-inf", "recurrence": {"every_seconds": 1e30}}, "recurrence"),
}


@pytest.mark.parametrize("shape", sorted(POISON))
def test_a_poison_document_is_quarantined_and_good_timers_fire(make, clock, store, shape):
    fields, reason = POISON[shape]
    scheduler = make(collection=store, batch_size=2)
    fired: list[str] = []
    scheduler.subscribe(TIMER, lambda item, attempt: fired.append(item.id))
    store.insert_one(raw(clock, **fields))  # oldest: every claim meets it first
    for n in range(5):
        scheduler.schedule(ScheduleItem(f"good-{n}", TIMER, clock.now() + timedelta(seconds=n)))

    clock.advance(timedelta(seconds=5))
    assert scheduler.run_due() == 5
    assert sorted(fired) == [f"good-{n}" for n in range(5)]
    assert store.count_documents({}) == 0
    (record_reason,) = quarantined(store).values()
    assert reason in record_reason


def test_a_stored_recurrence_with_no_slot_left_is_a_dead_letter_and_good_timers_fire(
    make, clock, store
):
    # Not poison: a valid item with no slot before the year 10000, set aside unrun as a dead
    # letter, by the node core's one rule on every store (tests/contract/
    # test_recurring_exhausted.py); the sweeper used to quarantine it.
    scheduler = make(collection=store, batch_size=2)
    fired: list[str] = []
    scheduler.subscribe(TIMER, lambda item, attempt: fired.append(item.id))
    recurrence = {"every_seconds": 1, "start": "9999-12-31T23:59:59Z"}
    store.insert_one(raw(clock, _id="rec-9999", recurrence=recurrence, applied=None, runs=0))
    for n in range(5):
        scheduler.schedule(ScheduleItem(f"good-{n}", TIMER, clock.now() + timedelta(seconds=n)))

    clock.advance(timedelta(seconds=5))
    scheduler.run_due()
    assert sorted(fired) == [f"good-{n}" for n in range(5)]
    assert store.count_documents({}) == 0 and quarantined(store) == {}
    (letter,) = scheduler.dead_letters()
    assert letter.item.id == "rec-9999" and "before the year 10000" in letter.error


def test_poison_is_quarantined_once_and_logged_once_across_nodes(make, clock, store, caplog):
    a, b = make(collection=store), make(collection=store)
    for node in (a, b):
        node.subscribe(TIMER, lambda item, attempt: None)
    store.insert_one(raw(clock, _id="max", deliveries=2**63 - 1))
    store.insert_one(raw(clock, _id="no-due", due=...))
    caplog.set_level(logging.ERROR, logger="flowsched.mongo")
    for _ in range(3):
        a.run_due()
        b.run_due()
    assert sorted(quarantined(store)) == ["'max'", "'no-due'"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2, errors


def test_the_audit_finds_documents_the_claim_query_never_sees(make, clock, store):
    scheduler = make(collection=store)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    scheduler.run_due()  # the first claim audits: nothing yet
    store.insert_one(raw(clock, _id="no-ready", ready_at=...))
    store.insert_one(raw(clock, _id="text-ready", ready_at="now"))
    store.insert_one(raw(clock, _id="no-kind-no-route", kind=..., route=...))
    scheduler.run_due()
    assert store.count_documents({}) == 3  # not audited again before AUDIT_EVERY
    clock.advance(AUDIT_EVERY)
    scheduler.run_due()
    assert store.count_documents({}) == 0
    assert sorted(quarantined(store)) == ["'no-kind-no-route'", "'no-ready'", "'text-ready'"]


def test_the_nodes_of_a_collection_take_turns_to_audit_it(make, clock, store):
    # The audit reads the whole collection: each node at its first claim, then one node per
    # period, not every node.
    a, b = make(collection=store), make(collection=store)
    for node in (a, b):
        node.subscribe(TIMER, lambda item, attempt: None)
        node.run_due()  # each node's first claim audits
    clock.advance(AUDIT_EVERY)
    a.run_due()  # a's turn
    store.insert_one(raw(clock, _id="no-ready", ready_at=...))
    b.run_due()  # within a's period: b does not read the collection
    assert store.count_documents({}) == 1
    clock.advance(AUDIT_EVERY)
    b.run_due()  # the period is over: b's turn
    a.run_due()
    assert store.count_documents({}) == 0
    assert list(quarantined(store)) == ["'no-ready'"]
    turn = store.database[f"{store.name}_settings"].find_one({"_id": "audit"})
    assert turn["by"] == b.node_id


def test_a_document_claimed_while_the_audit_moves_it_aside_keeps_one_record(clock, store, caplog):
    # Another node claims the document between the audit's record and its (fenced) delete:
    # the audit withdraws its record and says nothing; the claimer's harvest moves the
    # document aside under its claim (one record, one error line, as for any document).
    store.insert_one(raw(clock, _id="wrong-kind", kind=5))
    timers = TimerStore(store, node="auditor")
    write = timers.put_quarantined_steps

    def write_then_claimed_elsewhere(records, **options):
        written = yield from write(records, **options)
        store.update_one(
            {"_id": "wrong-kind"},
            {"$set": {"ready_at": clock.now() + timedelta(seconds=30), "claim": {"t": "x"}}},
        )
        return written

    timers.put_quarantined_steps = write_then_claimed_elsewhere
    with caplog.at_level(logging.ERROR, logger="flowsched.mongo"):
        assert Audit(Quarantiner(timers, "auditor")).run(clock.now(), 0.0) == 0

    assert quarantined(store) == {}
    assert store.find_one({"_id": "wrong-kind"})["claim"] == {"t": "x"}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_a_document_in_another_bucket_than_its_ids_is_moved_aside(make, clock, store):
    # Found by the claim query (its bucket is served), never claimable (the claiming update
    # names the id's bucket): left there it would never fire and keep the node busy.
    scheduler = make(collection=store, buckets=4)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    wrong = (bucket_of("t", 4) + 1) % 4
    store.insert_one(raw(clock, _id="t", bucket=wrong))
    scheduler.run_due()
    assert store.count_documents({}) == 0
    assert quarantined(store) == {
        "'t'": f"bucket must be {bucket_of('t', 4)} (crc32 of _id mod 4), got {wrong}"
    }


def test_a_timer_without_a_route_is_legacy_not_poison(make, clock, store):
    scheduler = make(collection=store)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    store.insert_one(raw(clock, _id="legacy", route=...))  # stored before routing
    clock.advance(AUDIT_EVERY)
    scheduler.run_due()
    assert scheduler.exists("legacy") and quarantined(store) == {}


def test_a_document_replaced_since_it_was_read_is_left_alone(make, clock, store, caplog):
    # The claim read the poison document; before its move aside deletes it, the id is
    # scheduled again: the new timer stays, the record written is withdrawn, nothing logged.
    scheduler = make(collection=store)
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    store.insert_one(raw(clock, _id="t", deliveries=2**63 - 1))
    later = clock.now() + timedelta(hours=1)
    roles = scheduler.store.steps.roles
    write = roles.put_quarantined_steps

    def write_then_scheduled_again(records, **options):
        written = yield from write(records, **options)
        MongoTimerStore(store, clock=clock).put(ScheduleItem("t", TIMER, later))
        return written

    roles.put_quarantined_steps = write_then_scheduled_again
    with caplog.at_level(logging.ERROR, logger="flowsched.mongo"):
        assert scheduler.run_due() == 0

    assert scheduler.get("t").due == later  # type: ignore[union-attr]
    assert quarantined(store) == {}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_quarantine_record_of_a_16_mib_document_keeps_what_fits(mongo_db, make, clock, caplog):
    store = mongo_db["timers"]
    scheduler = make(collection=store)
    fired: list[str] = []
    scheduler.subscribe(TIMER, lambda item, attempt: fired.append(item.id))
    doc = raw(clock, _id="fat", blob="")
    # 20 bytes short of the 16 MiB limit: too large to take a claim.
    doc["blob"] = "x" * (16 * 1024 * 1024 - 20 - len(bson.encode(doc)))
    store.insert_one(doc)
    scheduler.schedule(ScheduleItem("good", TIMER, clock.now()))
    caplog.set_level(logging.ERROR, logger="flowsched.mongo")

    assert scheduler.run_due() == 1 and fired == ["good"]
    assert store.count_documents({}) == 0
    (record,) = mongo_db["timers_quarantine"].find()
    assert record["item_id"] == "fat" and "refused to claim" in record["reason"]
    assert record["trimmed"] == ["blob"]
    assert record["document"]["due"] is not None and "too large" in record["document"]["blob"]
    assert any("too large to keep" in r.getMessage() for r in caplog.records)
