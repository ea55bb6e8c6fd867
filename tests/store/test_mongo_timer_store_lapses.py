"""MongoTimerStore counts a form's runs lost in a row (``Claim.lapsed``, stored as ``lapses``;
a node over it: tests/node/test_lost_runs.py), and ``MongoScheduler``'s sweeper still reads
the documents that carry the count."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from flowsched import ManualClock, ScheduleItem, ScheduleKind
from flowsched.outcomes import Redeliver
from flowsched.routes import name_route
from flowsched.store.records import Settlement

mongomock = pytest.importorskip("mongomock")

from flowsched.mongo import MongoScheduler, MongoTimerStore  # noqa: E402

LEASE = timedelta(seconds=30)
PAST_LEASE = LEASE + timedelta(seconds=1)
WORK = frozenset({name_route("work")})


def _collection() -> Any:
    return mongomock.MongoClient(tz_aware=True).db[f"t_{uuid.uuid4().hex[:8]}"]


def _die(store: MongoTimerStore, clock: ManualClock, routes: frozenset[str], node: str) -> None:
    """``node`` claims the item started, then dies: its lease ends unsettled."""
    assert len(store.claim_started(routes, node, LEASE, 10)) == 1
    clock.jump(PAST_LEASE)


def test_the_count_is_stored_and_a_kept_settle_removes_it() -> None:
    clock = ManualClock()
    collection = _collection()
    store = MongoTimerStore(collection, clock=clock)
    store.put(ScheduleItem("x", ScheduleKind.TIMER, clock.now(), handler="work"))
    _die(store, clock, WORK, "dead-1")
    [claim] = store.claim_started(WORK, "dead-2", LEASE, 10)
    assert claim.lapsed == 1 and collection.find_one({"_id": "x"})["lapses"] == 1
    clock.jump(PAST_LEASE)
    [claim] = store.claim_due(WORK, "node", LEASE, 10)  # found the second lost run
    assert claim.lapsed == 2 and collection.find_one({"_id": "x"})["lapses"] == 2
    retry = Redeliver(clock.now(), 1, "DeliveryLost: lost twice")
    [settled] = store.settle([Settlement(claim, retry)])
    assert settled.applied and "lapses" not in collection.find_one({"_id": "x"})
    [again] = store.claim_due(WORK, "node", LEASE, 10)
    assert again.lapsed == 0, again


def test_a_mongo_scheduler_delivers_a_document_that_carries_the_count() -> None:
    clock = ManualClock()
    collection = _collection()
    store = MongoTimerStore(collection, clock=clock)
    routes = frozenset({"k:TIMER"})
    store.put(ScheduleItem("x", ScheduleKind.TIMER, clock.now(), payload={"n": 1}))
    _die(store, clock, routes, "dead-1")
    [claim] = store.claim_due(routes, "node", LEASE, 10)
    assert store.release([claim]) == 1
    assert collection.find_one({"_id": "x"})["lapses"] == 1
    seen: list[tuple[str, int]] = []
    scheduler = MongoScheduler(collection, clock=clock, node_id="sweeper")
    try:
        scheduler.subscribe(
            ScheduleKind.TIMER, lambda item, attempt: seen.append((item.id, attempt))
        )
        stored = scheduler.get("x")
        assert stored is not None and stored.payload == {"n": 1}
        scheduler.run_due()  # one lost run is free (node/lost.py): run again, attempt 0
        assert seen == [("x", 0)], seen
        assert not scheduler.exists("x")
        assert collection.database[f"{collection.name}_quarantine"].count_documents({}) == 0
    finally:
        scheduler.close()


def test_a_count_written_by_hand_does_not_stop_the_claims() -> None:
    clock = ManualClock()
    collection = _collection()
    store = MongoTimerStore(collection, clock=clock)
    store.put(ScheduleItem("x", ScheduleKind.TIMER, clock.now(), handler="work"))
    store.put(ScheduleItem("y", ScheduleKind.TIMER, clock.now(), handler="work"))
    assert len(store.claim_started(WORK, "dead-1", LEASE, 10)) == 2
    collection.update_one({"_id": "x"}, {"$set": {"lapses": {"by": "hand"}}})
    clock.jump(PAST_LEASE)
    claims = {c.item.id: c.lapsed for c in store.claim_due(WORK, "node-b", LEASE, 10)}
    assert claims == {"x": 1, "y": 1}, f"claims after a malformed count: {claims}"
