"""A cancel or replace that meets a delivery whose start was recorded keeps that attempt in the
history (flowsched.mongo.keep_started, CONTRACT section 15), on mongomock's collections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
import pytest

from flowsched.mongo.history import MongoHistory
from flowsched.mongo.store import TimerStore

NOW = datetime(2026, 12, 6, 18, 0, tzinfo=UTC)
STARTED = NOW - timedelta(seconds=3)


def _store() -> tuple[TimerStore, MongoHistory]:
    store = TimerStore(mongomock.MongoClient(tz_aware=True).db.timers, node="a")
    journal = MongoHistory(lambda: NOW, "a")
    store.keep_started = journal.kept
    return store, journal


def _document(item_id: str, claim: dict[str, Any] | None, generation: int = 7) -> dict[str, Any]:
    return {"_id": item_id, "bucket": 0, "generation": generation, "claim": claim, "v": 1}


def _claim(started: datetime | None) -> dict[str, Any]:
    claim: dict[str, Any] = {"token": "tok", "owner": "b", "at": STARTED}
    claim["lease_until"] = NOW + timedelta(seconds=30)
    if started is not None:
        claim["started"] = started
    return claim


def _history(store: TimerStore, journal: MongoHistory, item_id: str) -> list[Any]:
    return journal.read(store, item_id)


def test_a_cancel_of_a_started_delivery_keeps_its_attempt_open() -> None:
    store, journal = _store()
    store.items.insert_one(_document("job", _claim(STARTED)))

    assert store.delete("job")

    assert store.items.count_documents({}) == 0
    [kept] = _history(store, journal, "job")
    assert (kept.node, kept.started, kept.ended, kept.generation) == ("b", STARTED, None, 7)


def test_a_cancel_of_a_claim_waiting_for_a_worker_keeps_nothing() -> None:
    store, _ = _store()
    store.items.insert_one(_document("job", _claim(None)))  # claimed, no recorded start

    assert store.delete("job")

    assert store.items.count_documents({}) == 0
    assert store.history.count_documents({}) == 0  # it will be given back unrun


def test_a_cancel_of_an_unknown_item_says_false_and_writes_nothing() -> None:
    store, _ = _store()
    assert not store.delete("nobody")
    assert store.history.count_documents({}) == 0


def test_a_replace_of_a_started_delivery_keeps_its_attempt_and_stores_the_new_form() -> None:
    store, journal = _store()
    store.items.insert_one(_document("job", _claim(STARTED)))

    store.put(_document("job", None, generation=8) | {"v": 2})

    stored = store.items.find_one({"_id": "job"})
    assert (stored["v"], stored["generation"], stored["claim"]) == (2, 8, None)
    [kept] = _history(store, journal, "job")
    assert (kept.started, kept.ended, kept.generation) == (STARTED, None, 7)


def test_a_replace_of_an_unstarted_form_is_the_plain_upsert() -> None:
    store, _ = _store()
    store.items.insert_one(_document("job", _claim(None)))
    store.put(_document("job", None, generation=8) | {"v": 2})
    assert store.items.find_one({"_id": "job"})["v"] == 2
    assert store.history.count_documents({}) == 0


def test_the_outcome_of_a_kept_attempt_takes_its_place() -> None:
    store, journal = _store()
    store.items.insert_one(_document("job", _claim(STARTED)))
    assert store.delete("job")
    # The node that ran it writes the ended attempt with the recorded start (settle's journal).
    from flowsched.mongo.history import attempt_document
    from flowsched.steering import Attempt

    ended = Attempt("b", STARTED, NOW, "succeeded", generation=7, attempt=0)
    store.run(journal.write_steps(store, [("job", attempt_document(ended, "other-key"))]))

    assert [(a.started, a.ended, a.outcome) for a in _history(store, journal, "job")] == [
        (STARTED, NOW, "succeeded")
    ]


def test_a_cancel_of_a_claim_whose_lease_ended_keeps_it_as_lapsed() -> None:
    # Its node died mid-delivery (an operator cancels the stuck item): nobody will end it.
    store, journal = _store()
    claim = _claim(STARTED) | {"lease_until": NOW - timedelta(seconds=1)}
    store.items.insert_one(_document("job", claim))

    assert store.delete("job")

    [kept] = _history(store, journal, "job")
    assert (kept.started, kept.ended, kept.outcome) == (
        STARTED,
        NOW - timedelta(seconds=1),
        "lapsed",
    )


@pytest.mark.wire
def test_on_the_server_a_cancel_whose_kept_attempt_is_refused_still_says_true(
    mongo_db: Any,
) -> None:
    # The history document cannot take the kept attempt (not an array): inside the one
    # bulkWrite the delete applies and the upsert is refused. The cancel removed the item.
    store = TimerStore(mongo_db["timers"], node="a")
    journal = MongoHistory(lambda: NOW, "a")
    store.keep_started = journal.kept
    store.items.insert_one(_document("job", _claim(STARTED)))
    store.history.insert_one({"_id": "job", "attempts": "not an array"})

    assert store.delete("job")
    assert store.items.count_documents({}) == 0


@pytest.mark.wire
def test_on_the_server_a_replace_keeps_the_attempt_in_one_command(mongo_db: Any) -> None:
    store = TimerStore(mongo_db["timers"], node="a")
    journal = MongoHistory(lambda: NOW, "a")
    store.keep_started = journal.kept
    store.items.insert_one(_document("job", _claim(STARTED)))

    store.put(_document("job", None, generation=8) | {"v": 2})

    assert store.items.find_one({"_id": "job"})["v"] == 2
    [kept] = _history(store, journal, "job")
    assert (kept.started, kept.ended, kept.generation) == (STARTED, None, 7)


def test_a_kept_attempt_reads_lapsed_once_its_lease_passed_with_no_outcome() -> None:
    store, _ = _store()
    store.items.insert_one(_document("job", _claim(STARTED)) | {"attempts": 2})
    assert store.delete("job")
    later = MongoHistory(lambda: NOW + timedelta(minutes=5), "reader")  # its node died

    [kept] = later.read(store, "job")

    lease_end = NOW + timedelta(seconds=30)
    assert (kept.ended, kept.outcome, kept.attempt) == (lease_end, "lapsed", 2)


def test_a_kept_attempt_past_its_lease_stays_open_while_its_node_is_alive() -> None:
    # A handler that outlasts its lease after a cancel: its node still beats, so the
    # attempt is running, not lapsed; once the node's heartbeat expires it reads lapsed.
    store, _ = _store()
    store.items.insert_one(_document("job", _claim(STARTED)))
    assert store.delete("job")
    later = NOW + timedelta(minutes=5)
    store.nodes.insert_one({"_id": "b", "expires_at": later + timedelta(seconds=10)})
    reader = MongoHistory(lambda: later, "reader")

    [running] = reader.read(store, "job")
    assert (running.node, running.ended, running.outcome) == ("b", None, None)

    gone = MongoHistory(lambda: later + timedelta(seconds=11), "reader")
    [lapsed] = gone.read(store, "job")
    assert (lapsed.ended, lapsed.outcome) == (NOW + timedelta(seconds=30), "lapsed")


def test_a_late_outcome_of_a_kept_attempt_that_read_lapsed_takes_its_place() -> None:
    from flowsched.mongo.history import attempt_document
    from flowsched.steering import Attempt

    store, journal = _store()
    store.items.insert_one(_document("job", _claim(STARTED)))
    assert store.delete("job")
    done = NOW + timedelta(minutes=1)  # past the lease: the run completed late
    ended = Attempt("b", STARTED, done, "succeeded", generation=7, attempt=0)
    store.run(journal.write_steps(store, [("job", attempt_document(ended, "other-key"))]))
    later = MongoHistory(lambda: NOW + timedelta(minutes=5), "reader")

    assert [(a.ended, a.outcome) for a in later.read(store, "job")] == [(done, "succeeded")]
