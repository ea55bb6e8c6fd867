"""Every command the scheduler sends on its timers collection names the shard key's bucket.

The shard key is ``{bucket: 1, _id: 1}`` (docs/explanation/scaling.md): a command whose filter
names the bucket is routed by mongos to the shards holding it, not broadcast. Checked with
command monitoring on the wire server, with 4 buckets, over every kind of operation: schedule
(upsert), lookups, cancel, cancel_flow, claim (find, update, read back), start marks, renewal,
a recurring item's slot fence, and settlement (complete, redeliver, move to the next slot,
dead letter). The one exception is the poison audit's periodic scan of the whole collection.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from commands import Commands, monitored_database

from flowsched.clock import ManualClock
from flowsched.delivery import Observer, RedeliveryPolicy
from flowsched.mongo import MongoScheduler
from flowsched.mongo.documents import bucket_of
from flowsched.mongo.quarantine import Audit
from flowsched.port import Recurrence, ScheduleItem, ScheduleKind

pytestmark = pytest.mark.wire

BUCKETS = 4
TIMER = ScheduleKind.TIMER
ADMIN = {"createIndexes", "dropIndexes", "listIndexes"}
START_DUE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # the mongomock tests' clock start


class Cancelled(Observer):
    """An observer that hears of cancellations: cancel_flow reads the ids first."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def cancelled(self, item_id: str) -> None:
        self.ids.append(item_id)


@pytest.fixture
def monitored(mongo_uri: str) -> Iterator[tuple[Any, Commands]]:
    with monitored_database(mongo_uri, "fs_shard") as (database, commands):
        yield database["timers"], commands


def filters(name: str, command: dict[str, Any]) -> list[dict[str, Any]]:
    """The filters of one command (an insert's documents, which carry the key themselves)."""
    if name == "find":
        return [command["filter"]]
    if name == "findAndModify":
        return [command["query"]]
    if name == "update":
        return [statement["q"] for statement in command["updates"]]
    if name == "delete":
        return [statement["q"] for statement in command["deletes"]]
    if name == "insert":
        return list(command["documents"])
    if name == "aggregate":
        return [stage["$match"] for stage in command["pipeline"] if "$match" in stage]
    raise AssertionError(f"unexpected command {name}: {command}")


def audit(command: dict[str, Any]) -> bool:
    """The poison audit's scan (on purpose over every bucket), and its writes on what it
    found (the fields it reads may miss the key: a document without a bucket is poison)."""
    return command.get("filter") == Audit.QUERY


def names_its_bucket(query: dict[str, Any]) -> bool:
    """``bucket`` is named and, for a query by id, agrees with every id's bucket."""
    if "bucket" not in query:
        return False
    bucket = query["bucket"]
    allowed = set(bucket["$in"]) if isinstance(bucket, dict) else {bucket}
    ids = query.get("_id")
    if ids is None:
        return True
    ids = ids["$in"] if isinstance(ids, dict) else [ids]
    return {bucket_of(item_id, BUCKETS) for item_id in ids} <= allowed


def test_every_command_on_the_timers_names_the_bucket(monitored):
    collection, commands = monitored
    clock = ManualClock(datetime.now(UTC))
    observer = Cancelled()
    scheduler = MongoScheduler(
        collection,
        clock=clock,
        buckets=BUCKETS,
        observer=observer,
        redelivery=RedeliveryPolicy(max_attempts=2),
    )
    failing = {"fails-once", "always-fails"}
    ran: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        ran.append(item.id)
        if item.id == "always-fails" or (item.id == "fails-once" and attempt == 0):
            raise RuntimeError("boom")

    scheduler.subscribe(TIMER, handler)
    now = clock.now()
    for n in range(12):
        scheduler.schedule(ScheduleItem(f"t-{n}", TIMER, now, flow_id="f" if n < 3 else None))
    for item_id in failing:
        scheduler.schedule(ScheduleItem(item_id, TIMER, now))
    scheduler.schedule_recurring("hourly", Recurrence.every(timedelta(hours=1)))
    assert scheduler.exists("t-5") and scheduler.get("t-6") is not None
    assert scheduler.cancel("t-7") and not scheduler.cancel("never")
    assert scheduler.cancel_flow("f") == 3

    assert scheduler.run_due() == 10  # 8 t-*, and a first try of each failing one
    clock.advance(timedelta(hours=1))
    scheduler.run_due()  # the retries (one dead letter) and a recurring tick
    store, lease = scheduler.store, timedelta(seconds=30)
    clock.advance(timedelta(hours=1))
    claimed = store.claim_due(["k:TIMER"], "other", lease, 10)
    assert claimed  # the recurring item, claimed to confirm, renew and release it
    assert store.confirm_start(claimed) == claimed
    assert len(store.renew(claimed, lease)) == len(claimed)
    assert store.release(claimed) == len(claimed)

    assert [letter.item.id for letter in scheduler.dead_letters()] == ["always-fails"]
    assert "fails-once" in ran and ran.count("hourly") == 1
    scheduler.schedule(ScheduleItem("lost", TIMER, clock.now()))
    assert store.claim_started(["k:TIMER"], "gone", lease, 1)  # started, then lost
    clock.advance(timedelta(minutes=1))  # past the lease
    assert scheduler.run_due() >= 1  # claimed again: the lost run recorded, then run
    assert "lost" in ran
    # The poison audit (every 5 minutes) looks for documents the claim query can never
    # find, those without a bucket among them: a deliberate scan of every shard.
    sent = [
        (name, command)
        for name, collection, command in commands.sent
        if collection == "timers" and name not in ADMIN and not audit(command)
    ]
    assert {name for name, _ in sent} >= {"find", "update", "delete", "findAndModify"}
    missing = [
        (name, query)
        for name, command in sent
        for query in filters(name, command)
        if not names_its_bucket(query)
    ]
    assert missing == []


def test_items_spread_over_the_buckets_by_id(monitored):
    collection, _ = monitored
    scheduler = MongoScheduler(collection, clock=ManualClock(datetime.now(UTC)), buckets=BUCKETS)
    for n in range(40):
        scheduler.schedule(ScheduleItem(f"t-{n}", TIMER, datetime.now(UTC)))
    stored = {doc["_id"]: doc["bucket"] for doc in collection.find({}, {"bucket": 1})}
    assert stored == {f"t-{n}": bucket_of(f"t-{n}", BUCKETS) for n in range(40)}
    assert set(stored.values()) == set(range(BUCKETS))


def test_one_bucket_by_default(make, collection):
    make().schedule(ScheduleItem("t", TIMER, datetime.now(UTC)))
    assert collection.find_one({"_id": "t"})["bucket"] == 0


def test_a_node_claims_only_the_buckets_it_serves(make):
    ids = [f"t-{n}" for n in range(20)]
    fired: dict[str, list[str]] = {"zero": [], "one": []}
    nodes = {
        name: make(buckets=2, serve_buckets=[bucket]) for name, bucket in (("zero", 0), ("one", 1))
    }
    for name, node in nodes.items():
        node.subscribe(TIMER, lambda item, attempt, name=name: fired[name].append(item.id))
    for item_id in ids:
        nodes["zero"].schedule(ScheduleItem(item_id, TIMER, START_DUE))
    assert nodes["zero"].run_due() + nodes["one"].run_due() == len(ids)
    for name, bucket in (("zero", 0), ("one", 1)):
        assert fired[name] and all(bucket_of(i, 2) == bucket for i in fired[name])


@pytest.mark.parametrize("served", [[], [2], [-1], [True], [0, "1"], 3, "01"])
def test_serve_buckets_must_name_existing_buckets(collection, served):
    with pytest.raises(ValueError, match="serve_buckets"):
        MongoScheduler(collection, buckets=2, serve_buckets=served)
