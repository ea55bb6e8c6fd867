"""Server round trips, counted with pymongo's command monitoring on the wire server.

Target from the issue: at most 0.1 round trips per fired item with batches of 100; with the
delivery history riding on each settle (issue 40), at most 0.05.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from commands import Commands, monitored_database

from flowsched.clock import ManualClock
from flowsched.mongo import MongoScheduler
from flowsched.mongo.store import ID_CHUNK
from flowsched.port import Recurrence, ScheduleItem, ScheduleKind

pytestmark = pytest.mark.wire


@pytest.fixture
def counted(mongo_uri: str) -> Iterator[tuple[Any, Commands]]:
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        yield database["timers"], commands


def test_each_port_operation_is_one_round_trip(counted):
    collection, commands = counted
    clock = ManualClock(datetime.now(UTC))
    scheduler = MongoScheduler(collection, clock=clock)
    scheduler.exists("warm-up")  # creates the indexes once
    commands.take_names()

    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now(), flow_id="f"))
    assert commands.take_names() == {"update": 1}  # replace_one(upsert=True)
    assert scheduler.exists("t")
    assert commands.take_names() == {"find": 1}
    assert scheduler.cancel("t")
    assert commands.take_names() == {"delete": 1}
    assert scheduler.cancel_flow("f") == 0
    assert commands.take_names() == {"delete": 1}


def _speaks_8_0(collection: Any) -> bool:
    """Whether the server takes MongoDB 8.0's client-level bulkWrite (wire version 25)."""
    return collection.database.client.admin.command("hello")["maxWireVersion"] >= 25


@pytest.mark.parametrize("together", [True, False], ids=["bulkWrite", "before-8.0"])
def test_firing_costs_at_most_a_tenth_of_a_round_trip_per_item(counted, together):
    collection, commands = counted
    if together and not _speaks_8_0(collection):
        pytest.skip("the server is older than MongoDB 8.0: no client-level bulkWrite")
    clock = ManualClock(datetime.now(UTC))
    scheduler = MongoScheduler(collection, clock=clock, batch_size=100)
    scheduler._store.together.usable = together  # before 8.0: as the server's refusal sets it
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    scheduler.run_due()  # the first claim also audits the collection (then every 5 minutes)
    for n in range(200):
        scheduler.schedule(ScheduleItem(f"t-{n:03}", ScheduleKind.TIMER, clock.now()))
    commands.take_names()

    assert scheduler.run_due() == 200
    seen = commands.take_names()
    assert len(set(fired)) == 200
    # Per batch of 100: find the documents, claim them (update; it won them all, so no
    # read-back), check right before the handlers that their claims still hold - run_due
    # runs them one after another, so it records no start on the claim (one find by ids
    # covers them all: flowsched.mongo.start_check) -, settle (all deletes here) and, in the
    # same command, the batch's attempts into the history (MongoDB 8's client-level
    # bulkWrite: flowsched.mongo.together). Then one find that comes back empty. (A running
    # node whose idle workers take the whole batch needs no check: 3 per batch.)
    if together:
        assert seen == {"find": 2 * 2 + 1, "update": 2, "bulkWrite": 2}
        assert sum(seen.values()) / 200 <= 0.05
    else:  # the settle's deletes, then the history's upserts: one more command per batch
        assert seen == {"find": 2 * 2 + 1, "update": 2 + 2, "delete": 2}
        assert sum(seen.values()) / 200 <= 0.06
    assert collection.count_documents({}) == 0


def test_a_recurring_tick_costs_one_round_trip_more_than_a_one_shot_delivery(counted):
    collection, commands = counted
    clock = ManualClock(datetime.now(UTC))
    scheduler = MongoScheduler(collection, clock=clock)
    ticks: list[datetime] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: ticks.append(item.due))
    scheduler.run_due()  # the first claim also audits the collection (then every 5 minutes)
    first = scheduler.schedule_recurring("sweep", Recurrence.every(timedelta(hours=1)))
    commands.take_names()

    clock.advance(timedelta(hours=1))
    assert scheduler.run_due() == 1
    seen = commands.take_names()

    assert ticks == [first.due]
    # find the document, claim (update; no read-back: it won it), take the slot (update),
    # settle: move to the next slot (update); then one find that comes back empty. A
    # one-shot item: the same without taking the slot, and a delete to settle. Plus, an hour
    # having passed, this claim also audits the collection (every 5 minutes): one
    # findAndModify to take the collection's audit turn, and its find. The settle writes the
    # tick's attempt into the history in the same command (one bulkWrite for both
    # collections), and the check before the handler that the claim still holds is one find
    # (run_due records no start on a claim).
    if _speaks_8_0(collection):
        assert seen == {"find": 4, "update": 2, "bulkWrite": 1, "findAndModify": 1}
    else:
        assert seen == {"find": 4, "update": 2 + 2, "findAndModify": 1}


def test_a_completed_batch_is_settled_with_one_delete_by_claim_token(mongo_uri):
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        if not _speaks_8_0(database["timers"]):
            pytest.skip("before MongoDB 8.0 the settle is one delete command (the test below)")
        clock = ManualClock(datetime.now(UTC))
        scheduler = MongoScheduler(database["timers"], clock=clock, batch_size=50)
        scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
        for n in range(50):
            scheduler.schedule(ScheduleItem(f"t-{n:02}", ScheduleKind.TIMER, clock.now()))
        assert scheduler.run_due() == 50
        assert database["timers"].count_documents({}) == 0
        settles = [command for name, _, command in commands.sent if name == "bulkWrite"]
    # One command (one round trip) settles the whole batch, and carries its history: delete
    # statements on the items of at most ID_CHUNK ids each (multi: every match), each fenced
    # by the claim token, and one history upsert per item.
    [settle] = settles
    namespaces = [info["ns"] for info in settle["nsInfo"]]
    items = namespaces.index(database["timers"].full_name)
    statements = [op for op in settle["ops"] if op.get("delete") == items]
    assert [len(s["filter"]["_id"]["$in"]) for s in statements] == [ID_CHUNK, 50 - ID_CHUNK]
    assert sorted(i for s in statements for i in s["filter"]["_id"]["$in"]) == [
        f"t-{n:02}" for n in range(50)
    ]
    tokens = {s["filter"]["claim.token"] for s in statements}
    assert len(tokens) == 1
    assert all(s["multi"] for s in statements)
    history = namespaces.index(database["timers_history"].full_name)
    assert sum(op.get("update") == history for op in settle["ops"]) == 50


def test_before_8_0_a_completed_batch_is_settled_with_one_delete_command(mongo_uri):
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        clock = ManualClock(datetime.now(UTC))
        scheduler = MongoScheduler(database["timers"], clock=clock, batch_size=50)
        scheduler._store.together.usable = False  # as an older server's refusal sets it
        scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
        for n in range(50):
            scheduler.schedule(ScheduleItem(f"t-{n:02}", ScheduleKind.TIMER, clock.now()))
        assert scheduler.run_due() == 50
        assert database["timers"].count_documents({}) == 0
        deletes = [c["deletes"] for name, _, c in commands.sent if name == "delete"]
        history = [
            u
            for name, target, c in commands.sent
            if target == "timers_history"
            for u in c.get("updates", [])
        ]
    [statements] = deletes  # one command, statements of at most ID_CHUNK ids, token-fenced
    assert [len(s["q"]["_id"]["$in"]) for s in statements] == [ID_CHUNK, 50 - ID_CHUNK]
    assert len({s["q"]["claim.token"] for s in statements}) == 1
    assert len(history) == 50  # then the history's command: one upsert per item


def test_a_claim_that_lost_a_candidate_reads_back_what_it_won(mongo_uri):
    # Another node replaces a candidate between the claim's find and its update (a fresh
    # generation): the update no longer modifies every candidate, so the claim reads back
    # what it won - and the replaced form is not delivered as the form read.
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        clock = ManualClock(datetime.now(UTC))
        scheduler = MongoScheduler(database["timers"], clock=clock)
        other = MongoScheduler(database["timers"], clock=clock, node_id="other")
        delivered: list[tuple[str, object]] = []
        scheduler.subscribe(
            ScheduleKind.TIMER, lambda item, attempt: delivered.append((item.id, item.payload))
        )
        for n in range(3):
            scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, clock.now()))
        claims = scheduler._claims
        take = claims._take

        def replaced_meanwhile(*args, **kwargs):
            claims._take = take  # once
            other.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, clock.now(), payload={"v": 2}))
            return (yield from take(*args, **kwargs))

        claims._take = replaced_meanwhile
        commands.take_names()
        assert scheduler.run_due() == 3
        finds = [command for name, _, command in commands.take() if name == "find"]
        assert sorted(delivered, key=str) == [("t-0", None), ("t-1", {"v": 2}), ("t-2", None)]
        # The first claim won 2 of its 3 candidates: it read them back (the one find by claim
        # token); the second claim won the replaced t-1, all it found: no read-back.
        read_backs = [f for f in finds if "claim.token" in f.get("filter", {})]
        assert len(read_backs) == 1
        assert database["timers"].count_documents({}) == 0
