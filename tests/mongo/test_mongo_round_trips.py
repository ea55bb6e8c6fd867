"""Server round trips, counted with pymongo's command monitoring on the wire server.

Each store call of the node core (:mod:`flowsched.node.core`) over the MongoDB timer store
costs a fixed number of commands whatever its size (``mongo/timer_claims.py``): a claim 2
(``find``, ``update``), a settle 2 (the items' ``delete``/``update``, the history's
``update``), a next-due query 1. So firing costs per item what the claims' sizes say: a node
whose workers take a whole batch of 100 stays under the issue's 0.1 round trips per item;
the threaded default (8 workers) claims at most its free workers and records each start, about
half a round trip per item (``bench/results/mongo_timer_store.md``) - never one per item.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from commands import Commands, bulk_write_capable, monitored_database, statements
from mongo_nodes import WAIT, eventually

from flowsched.clock import ManualClock, SystemClock
from flowsched.mongo import MongoScheduler
from flowsched.mongo.store import ID_CHUNK
from flowsched.port import Recurrence, ScheduleItem, ScheduleKind

pytestmark = pytest.mark.wire


@pytest.fixture
def counted(mongo_uri: str) -> Iterator[tuple[Any, Commands]]:
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        yield database["timers"], commands


def test_each_port_operation_costs_a_fixed_number_of_round_trips(counted):
    collection, commands = counted
    clock = ManualClock(datetime.now(UTC))
    scheduler = MongoScheduler(collection, clock=clock)
    scheduler.exists("warm-up")  # creates the indexes once
    capable = bulk_write_capable(collection.database)
    commands.take_names()

    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now(), flow_id="f"))
    # The upsert (an update: it replaces no running form; one that would is a findAndModify,
    # reading back the running attempt the history keeps), then the delete of a dead letter
    # of that id (superseded by it): one client-level bulkWrite, in order (no letter goes
    # without its form), where the server has it (MongoDB 8.0+, the wire server); else two.
    sent = commands.take()
    assert statements(sent) == [("update", "timers"), ("delete", "timers_dead")]
    if capable:
        assert [name for name, _, _ in sent] == ["bulkWrite"] and sent[0][2]["ordered"] is True
    else:
        assert [name for name, _, _ in sent] == ["update", "delete"]
    assert scheduler.exists("t")
    assert commands.take_names() == {"find": 1}
    assert scheduler.get("t") is not None
    assert commands.take_names() == {"find": 1}
    assert scheduler.cancel("t")  # one findAndModify: removed, its running attempt read back
    assert commands.take_names() == {"findAndModify": 1}
    assert scheduler.cancel_flow("f") == 0  # the flow's timers read: none, nothing to delete
    assert commands.take_names() == {"find": 1}


# Measured alone: 0.075 (100 workers) and 0.5 (8); under the full suite's load a few more
# claims come back short (each then asks for the next due time): up to 0.115 seen.
@pytest.mark.parametrize(("workers", "bound"), [(100, 0.15), (8, 0.75)], ids=["100", "8"])
def test_firing_costs_a_bounded_share_of_a_round_trip_per_item(counted, workers, bound):
    collection, commands = counted
    scheduler = MongoScheduler(
        collection, batch_size=100, workers=workers, push_wakeup=False, node_id="n"
    )
    fired: set[str] = set()
    done = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        fired.add(item.id)
        if len(fired) == 200:
            done.set()

    scheduler.subscribe(ScheduleKind.TIMER, handler)
    for n in range(200):
        scheduler.schedule(ScheduleItem(f"t-{n:03}", ScheduleKind.TIMER, SystemClock().now()))
    commands.take_names()
    with scheduler:
        assert done.wait(WAIT)
        assert eventually(lambda: collection.count_documents({}) == 0)  # all settled
        # The node's threads' commands: not this thread's (start()'s set-up, and the
        # count_documents polls above: an aggregate each, as many as the wait takes).
        seen = Counter((name, target) for name, target, _ in commands.take_others())
    # The heartbeats (timers_nodes) are not firing; all the rest is: the bucket count's
    # check, claims (find + update), settles (one delete of the completed
    # items and one history update per batch of outcomes) and next-due queries after short
    # claims. 100 workers start on claim (claims of up to min(batch, free workers), started
    # as they are claimed); 8 queue batches of 100 and confirm each wave of 8 (an update).
    firing = sum(n for (name, target), n in seen.items() if target != "timers_nodes")
    updates = seen[("update", "timers")]
    assert updates >= 2  # 200 items, claims of at most 100: the node's commands were counted
    if workers >= 100:
        assert updates <= -(-200 // workers) + 2  # claims of (nearly) every free worker
    else:
        assert updates <= -(-200 // workers) + -(-200 // 100) + 4  # waves, a few claims
    assert firing / 200 <= bound, seen
    assert len(fired) == 200


def test_a_recurring_tick_costs_two_round_trips_more_than_a_one_shot_delivery(counted):
    collection, commands = counted
    clock = ManualClock(datetime.now(UTC))
    scheduler = MongoScheduler(collection, clock=clock)
    ticks: list[datetime] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: ticks.append(item.due))
    scheduler.run_due()  # the first claim also audits the collection (then every 5 minutes)
    scheduler.schedule(ScheduleItem("one", ScheduleKind.TIMER, clock.now()))
    commands.take_names()
    assert scheduler.run_due() == 1
    one_shot = commands.take_on()
    first = scheduler.schedule_recurring("sweep", Recurrence.every(timedelta(hours=1)))
    clock.advance(timedelta(hours=1))
    commands.take_names()
    assert scheduler.run_due() == 1
    tick = commands.take_on()

    assert len(ticks) == 2 and ticks[-1] == first.due
    # A settle writes its outcomes and their history in one client-level bulkWrite where
    # the server has it (MongoDB 8.0+, the wire server), else one command per collection.
    together = ("bulkWrite", "1") in one_shot
    settle = {("bulkWrite", "1"): 1} if together else {("update", "timers_history"): 1}
    # One shot: the claim's find and update; the settle's delete (by claim token) and its
    # history update; then the next claim's find comes back empty and one next-due query.
    assert one_shot == {
        ("find", "timers"): 3,
        ("update", "timers"): 1,
        **settle,
        **({} if together else {("delete", "timers"): 1}),
    }
    # A tick: the same, but the claim reads back what it won (a slot another node settled
    # since the read is not run twice: one find) and the settle moves it to its next slot
    # (an update, not a delete). An hour having passed, this claim also audits the
    # collection (every 5 minutes): a findAndModify to take the audit's turn and its find.
    assert tick == {
        ("findAndModify", "timers_settings"): 1,
        ("find", "timers"): 3 + 1 + 1,
        ("update", "timers"): 1 if together else 2,
        **settle,
    }


def settle_statements(sent: Any) -> tuple[list[list[Any]], list[Any]]:
    """The settles' deletes on the timers (per command, as ``delete`` statements) and the
    history's updates, from ``delete`` / ``update`` commands or client-level ``bulkWrite``s."""
    deletes: list[list[Any]] = []
    history: list[Any] = []
    for name, on, command in sent:
        if (name, on) == ("delete", "timers"):
            deletes.append(command["deletes"])
        elif (name, on) == ("update", "timers_history"):
            history += command.get("updates", [])
        elif name == "bulkWrite":
            spaces = [info["ns"].rsplit(".", 1)[1] for info in command["nsInfo"]]
            ops = command["ops"]
            mine = [
                {"q": op["filter"], "limit": 0 if op.get("multi") else 1}
                for op in ops
                if "delete" in op and spaces[op["delete"]] == "timers"
            ]
            deletes += [mine] if mine else []
            history += [
                op for op in ops if "update" in op and spaces[op["update"]].endswith("_history")
            ]
    return deletes, history


def test_a_completed_batch_is_settled_with_deletes_by_claim_token(mongo_uri):
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        timers = database["timers"]
        scheduler = MongoScheduler(timers, batch_size=50, workers=50, push_wakeup=False)
        done = threading.Event()
        fired: set[str] = set()

        def handler(item: ScheduleItem, attempt: int) -> None:
            fired.add(item.id)
            if len(fired) == 50:
                done.set()

        scheduler.subscribe(ScheduleKind.TIMER, handler)
        for n in range(50):
            scheduler.schedule(ScheduleItem(f"t-{n:02}", ScheduleKind.TIMER, SystemClock().now()))
        with scheduler:
            assert done.wait(WAIT)
            assert eventually(lambda: timers.count_documents({}) == 0)
        deletes, history = settle_statements(commands.sent)
    # The 50 were claimed together (workers free for all): their settles delete them in a
    # few commands (one per batch of outcomes gathered, not one per item; with the history
    # in the same client-level bulkWrite where the server has it), each a statement per
    # chunk of at most ID_CHUNK ids (multi: every match) fenced by the claim token.
    statements = [s for command in deletes for s in command]
    assert len(deletes) <= 5
    assert all(len(s["q"]["_id"]["$in"]) <= ID_CHUNK and s["limit"] == 0 for s in statements)
    assert all("claim.token" in s["q"] for s in statements)
    assert sorted(i for s in statements for i in s["q"]["_id"]["$in"]) == [
        f"t-{n:02}" for n in range(50)
    ]
    assert len(history) == 50  # then the history's command(s): one upsert per item


def test_a_claim_that_lost_a_candidate_reads_back_what_it_won(mongo_uri):
    # Another node replaces a candidate between the claim's find and its update (a fresh
    # generation): the update no longer takes every candidate, so the claim reads back
    # what it won - and the replaced form is not delivered as the form read.
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        clock = ManualClock(datetime.now(UTC))
        scheduler = MongoScheduler(database["timers"], clock=clock, batch_size=3)
        other = MongoScheduler(database["timers"], clock=clock, node_id="other")
        delivered: list[tuple[str, object]] = []
        scheduler.subscribe(
            ScheduleKind.TIMER, lambda item, attempt: delivered.append((item.id, item.payload))
        )
        for n in range(3):
            scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, clock.now()))
        store = scheduler.store
        routes = ["k:TIMER"]
        steps = store.steps
        read = steps.read

        def replaced_meanwhile(*args: Any, **kwargs: Any) -> Any:
            steps.read = read  # once, after the claim's find
            other.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, clock.now(), payload={"v": 2}))
            return (yield from read(*args, **kwargs))

        steps.read = replaced_meanwhile
        commands.take_names()
        won = store.claim_started(routes, "n", timedelta(seconds=30), 3)
        finds = [command for name, _, command in commands.take() if name == "find"]
        # It won 2 of its 3 candidates: it read them back (the one find by claim token).
        assert sorted(c.item.id for c in won) == ["t-0", "t-2"]
        assert len([f for f in finds if "claim.token" in f.get("filter", {})]) == 1
        # The replaced t-1 is claimed next, as replaced; all it found: no read-back.
        again = store.claim_started(routes, "n", timedelta(seconds=30), 3)
        assert [(c.item.id, c.item.payload) for c in again] == [("t-1", {"v": 2})]
        finds = [command for name, _, command in commands.take() if name == "find"]
        assert not [f for f in finds if "claim.token" in f.get("filter", {})]


def test_a_schedule_over_a_running_form_removes_the_dead_letter_only_once_it_is_stored(mongo_uri):
    # The one-command schedule (form, then letter, in order) meets a running form: the server
    # refuses the form (a duplicate key) and does not try the letter; the form goes by its
    # findAndModify (which reads back the running attempt), and only then the letter.
    with monitored_database(mongo_uri, "fs_rt") as (database, commands):
        scheduler = MongoScheduler(database["timers"], push_wakeup=False)
        running, release = threading.Event(), threading.Event()

        def handler(item: ScheduleItem, attempt: int) -> None:
            running.set()
            release.wait(WAIT)

        scheduler.subscribe(ScheduleKind.TIMER, handler)
        with scheduler:
            now = datetime.now(UTC)
            scheduler.schedule(ScheduleItem("x", ScheduleKind.TIMER, now, payload={"v": 1}))
            assert running.wait(WAIT)
            database["timers_dead"].insert_one({"_id": "x", "left": "by an earlier form"})
            capable = bulk_write_capable(database)
            commands.take()
            commands.replies.clear()
            later = now + timedelta(hours=1)
            scheduler.schedule(ScheduleItem("x", ScheduleKind.TIMER, later, payload={"v": 2}))
            mine = commands.take_mine()  # not the node's own (a next-due find, say)
            sent = [(n, on) for n, on, _ in mine if on in ("1", "timers", "timers_dead")]
            together = [reply for name, reply in commands.replies if name == "bulkWrite"]
            release.set()
            stored = scheduler.get("x")
        assert stored is not None and stored.payload == {"v": 2}
        assert database["timers_dead"].count_documents({}) == 0
        assert sent[-1] == ("delete", "timers_dead")
        if capable:  # the letter was not tried; the form went once more, by findAndModify
            assert sent == [("bulkWrite", "1"), ("findAndModify", "timers"), sent[-1]]
            assert [(r["nErrors"], r["nDeleted"]) for r in together] == [(1, 0)]
        else:
            assert sent == [("update", "timers"), ("findAndModify", "timers"), sent[-1]]
