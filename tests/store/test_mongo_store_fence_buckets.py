"""MongoTimerStore: late writes apply nothing to a newer form (the ``stored_at`` fence),
buckets (the shard key) and the nodes' agreement on their count, and ``op_timeout``.

The late writes are played with two stores on one collection whose injected clocks differ:
the one behind sends its write with a deadline its own clock has not passed, as a write held
by a partition reaches the server after its caller gave up."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched import ConfigError, ManualClock, ScheduleItem, ScheduleKind, SchedulerUnavailable
from flowsched.mongo.documents import bucket_of
from flowsched.store.call_budget import call_budget

mongomock = pytest.importorskip("mongomock")

from flowsched.mongo import MongoTimerStore  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)
ROUTES = frozenset({"h:work"})


def _collection() -> Any:
    client: Any = mongomock.MongoClient(tz_aware=True)
    return client.db[f"t_{uuid.uuid4().hex[:8]}"]


def _item(item_id: str, due: datetime, **fields: Any) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, due, handler="work", **fields)


def _pair() -> tuple[MongoTimerStore, MongoTimerStore, ManualClock]:
    """A store whose clock is 10 s behind (``late``), and one on time, on one collection."""
    collection = _collection()
    behind, ahead = ManualClock(START), ManualClock(START + timedelta(seconds=10))
    return (
        MongoTimerStore(collection, clock=behind),
        MongoTimerStore(collection, clock=ahead),
        ahead,
    )


def test_a_late_remove_spares_the_form_stored_after_its_deadline() -> None:
    late, store, clock = _pair()
    store.put(_item("t", clock.now(), payload={"form": "new"}))
    deadline = START + timedelta(seconds=5)  # before the new form's stamp (START + 10 s)
    assert late.remove("t", deadline=deadline) is False
    kept = store.get("t")
    assert kept is not None and kept.payload == {"form": "new"}, kept
    assert late.remove("t") is True, "an unfenced remove still removes"


def test_a_late_remove_flow_spares_the_newer_forms_and_takes_the_older() -> None:
    late, store, clock = _pair()
    late.put(_item("old", START, flow_id="f"))  # stamped START by its own clock
    store.put(_item("new", clock.now(), flow_id="f"))
    assert late.remove_flow("f", deadline=START + timedelta(seconds=5)) == ["old"]
    assert store.exists("new") and not store.exists("old")


def test_a_late_replace_leaves_the_newer_form_and_says_nothing_applied() -> None:
    late, store, clock = _pair()
    store.put(_item("t", clock.now(), payload={"form": "new"}))
    with pytest.raises(SchedulerUnavailable, match="newer form"):
        late.put(_item("t", START, payload={"form": "late"}), deadline=START + timedelta(seconds=5))
    kept = store.get("t")
    assert kept is not None and kept.payload == {"form": "new"}, kept


def test_a_write_within_its_deadline_applies() -> None:
    late, store, clock = _pair()
    store.put(_item("t", clock.now(), payload={"form": "a"}))
    deadline = clock.now() + timedelta(seconds=30)
    stored = store.put(_item("t", clock.now(), payload={"form": "b"}), deadline=deadline)
    assert store.get("t") == stored
    assert store.remove("t", deadline=deadline) is True
    assert late.exists("t") is False


def test_documents_carry_their_bucket_and_a_node_claims_only_the_buckets_it_serves() -> None:
    collection, clock = _collection(), ManualClock(START)
    ids = [f"item-{n}" for n in range(40)]
    writer = MongoTimerStore(collection, clock=clock, buckets=4)
    for item_id in ids:
        writer.put(_item(item_id, START))
    for doc in collection.find({}, {"bucket": 1}):
        assert doc["bucket"] == bucket_of(doc["_id"], 4), doc
    ones = MongoTimerStore(collection, clock=clock, buckets=4, serve_buckets=[1])
    claimed = {c.item.id for c in ones.claim_due(ROUTES, "n1", LEASE, 100)}
    assert claimed == {i for i in ids if bucket_of(i, 4) == 1} and claimed, claimed
    # its own claims are next at their lease's end; the other buckets' items, due now, unseen
    assert ones.next_due(ROUTES) == START + LEASE, "next_due looks past the buckets it serves"
    rest = {c.item.id for c in writer.claim_due(ROUTES, "n0", LEASE, 100)}
    assert rest == set(ids) - claimed
    assert writer.remove(ids[0]) and not writer.exists(ids[0])


def test_a_store_with_another_bucket_count_is_refused_naming_both() -> None:
    collection, clock = _collection(), ManualClock(START)
    MongoTimerStore(collection, clock=clock, buckets=4).open()
    other = MongoTimerStore(collection, clock=clock, buckets=2)  # built with no round trip
    with pytest.raises(ConfigError, match=r"4 bucket\(s\)") as raised:
        other.exists("t")  # the first call checks the count
    assert "buckets=4" in str(raised.value)


def test_a_claim_passes_over_a_malformed_document_it_quarantined() -> None:
    clock = ManualClock(START)
    store = MongoTimerStore(_collection(), clock=clock, node="n1")
    store.put(_item("good", START + timedelta(seconds=1)))
    store.collection.insert_one(
        {"_id": "bad", "bucket": 0, "route": "h:work", "ready_at": START, "kind": 3}
    )  # due first: the claim's first read meets it
    clock.advance(timedelta(seconds=2))
    assert [c.item.id for c in store.claim_due(ROUTES, "n1", LEASE, 1)] == ["good"]
    [record] = store.quarantined()
    assert record.id == "bad" and "kind" in record.reason, record
    raw = store.collection.database[f"{store.collection.name}_quarantine"].find_one()
    assert raw is not None and "n1" in str(raw), raw


def test_requeue_leaves_a_timer_scheduled_since_unless_told_to_replace() -> None:
    clock = ManualClock(START)
    store = MongoTimerStore(_collection(), clock=clock)
    store.put(_item("t", START, payload={"form": "dead"}))
    store.collection.database[f"{store.collection.name}_dead"].insert_one(
        {**store.collection.find_one({"_id": "t"}), "dead_at": START, "error": "E: x"}
    )
    store.collection.update_one({"_id": "t"}, {"$set": {"payload": {"form": "new"}}})
    assert store.requeue("t", START) is None  # a newer timer stays; the letter goes
    assert store.dead_letters() == []
    kept = store.get("t")
    assert kept is not None and kept.payload == {"form": "new"}, kept


def test_a_heartbeat_advertises_the_routes_until_it_leaves() -> None:
    now = datetime.now(UTC).replace(microsecond=0)  # mongomock expires TTL documents by real time
    store = MongoTimerStore(_collection(), clock=ManualClock(now))
    store.heartbeat("n1", frozenset({"h:work"}), timedelta(seconds=60))
    nodes = store.collection.database[f"{store.collection.name}_nodes"]
    doc = nodes.find_one({"_id": "n1"})
    assert doc is not None and doc["routes"] == ["h:work"], doc
    assert doc["expires_at"].replace(tzinfo=UTC) == now + timedelta(seconds=60), doc
    store.leave("n1")
    assert nodes.find_one({"_id": "n1"}) is None
    store.ping()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"buckets": 0}, "buckets"),
        ({"buckets": 2, "serve_buckets": [2]}, "serve_buckets"),
        ({"op_timeout": timedelta(0)}, "op_timeout"),
    ],
)
def test_bad_settings_are_refused_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MongoTimerStore(_collection(), clock=ManualClock(START), **options)


def test_a_spent_budget_sends_nothing() -> None:
    store = MongoTimerStore(_collection(), clock=ManualClock(START), op_timeout=LEASE)
    assert store.op_timeout == LEASE and store.clock is not None
    with call_budget(0.0, 0.001), pytest.raises(SchedulerUnavailable, match="nothing was sent"):
        store.put(_item("t", START))
    assert not store.exists("t")
