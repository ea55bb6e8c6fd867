"""MongoTimerStore.claim_started: the claim and the start in one ``update_many`` (the node
core's ``start_on_claim``), on mongomock in virtual time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched import ManualClock, ScheduleItem, ScheduleKind
from flowsched.outcomes import Completed, Redeliver
from flowsched.store.records import Settlement

mongomock = pytest.importorskip("mongomock")

from flowsched.mongo import MongoTimerStore  # noqa: E402
from flowsched.node.scheduler import NodeScheduler  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)
ROUTES = frozenset({"h:work"})


def _store(clock: ManualClock) -> MongoTimerStore:
    client: Any = mongomock.MongoClient(tz_aware=True)
    return MongoTimerStore(client.db[f"t_{uuid.uuid4().hex[:8]}"], clock=clock)


def _item(item_id: str, clock: ManualClock, **fields: Any) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, clock.now(), handler="work", **fields)


def test_a_started_claim_counts_its_delivery_and_records_its_start() -> None:
    clock = ManualClock(START)
    store = _store(clock)
    store.put(_item("failed-twice", clock))
    for n in range(2):  # two failures: attempts 2
        [claim] = store.claim_due(ROUTES, "a", LEASE, 1)
        store.settle([Settlement(claim, Redeliver(clock.now(), n + 1, "E: no"))])
    store.put(_item("fresh", clock))
    clock.advance(timedelta(seconds=1))
    claims = store.claim_started(ROUTES, "b", LEASE, 10)
    by_id = {c.item.id: c for c in claims}
    assert set(by_id) == {"fresh", "failed-twice"}, claims
    for item_id, claim in by_id.items():
        doc = store.collection.find_one({"_id": item_id})
        assert doc["deliveries"] == claim.attempt + 1, (item_id, doc)
        assert doc["claim"]["at"] is not None and doc["claim"]["owner"] == "b", doc
        running = store.history(item_id)[-1]
        assert running.node == "b" and running.ended is None, store.history(item_id)
    assert store.confirm_start(claims) == claims, "a started claim no longer holds"


def test_a_cancel_after_a_started_claim_fences_its_settle_and_a_replacement_fires() -> None:
    clock = ManualClock(START)
    store = _store(clock)
    store.put(_item("x", clock, payload={"v": 1}))
    [old] = store.claim_started(ROUTES, "a", LEASE, 10)
    new = store.put(_item("x", clock, payload={"v": 2}))
    [stale] = store.settle([Settlement(old, Completed())])
    assert not stale.applied and store.get("x") == new, (
        "the old start's settle touched the new form"
    )
    [fresh] = store.claim_started(ROUTES, "b", LEASE, 10)
    assert fresh.item.payload == {"v": 2} and fresh.generation == new.generation, fresh
    assert store.remove("x") is True
    assert store.claim_started(ROUTES, "c", LEASE, 10) == []


def test_a_lapsed_started_claim_reads_lapsed_when_claimed_again() -> None:
    clock = ManualClock(START)
    store = _store(clock)
    store.put(_item("x", clock))
    [first] = store.claim_started(ROUTES, "a", LEASE, 10)
    clock.advance(LEASE + timedelta(seconds=1))
    [second] = store.claim_started(ROUTES, "b", LEASE, 10)
    outcomes = [(a.node, a.outcome) for a in store.history("x")]
    assert outcomes == [("a", "lapsed"), ("b", None)], outcomes
    retry = Redeliver(clock.now(), 1, "E: failed")
    [stale] = store.settle([Settlement(first, retry)])
    assert not stale.applied, "the lapsed claim's failure applied over the new claim"
    # A success settles its generation although b holds it (a late completion).
    [late] = store.settle([Settlement(first, Completed())])
    assert late.applied and late.late == timedelta(seconds=1), late
    assert not store.exists("x")
    [done] = store.settle([Settlement(second, Completed())])
    assert not done.applied, "b settled an item a late completion had settled"


class _Calls:
    """The store, its calls counted by name (``claim_started`` shown)."""

    def __init__(self, store: MongoTimerStore) -> None:
        self.store = store
        self.names: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            self.names.append(name)
            return method(*args, **kwargs)

        return call


def test_a_node_over_it_starts_on_claim_with_no_confirm() -> None:
    clock = ManualClock(START)
    calls = _Calls(_store(clock))
    node = NodeScheduler(calls, clock=clock)  # type: ignore[arg-type]
    ran: list[str] = []
    node.register("work", lambda item, attempt: ran.append(item.id))
    node.start()
    try:
        for n in range(3):
            node.schedule(_item(f"t{n}", clock))
        clock.advance(timedelta(seconds=1))
        assert sorted(ran) == ["t0", "t1", "t2"], ran
        assert "claim_started" in calls.names and "confirm_start" not in calls.names, calls.names
        assert "claim_due" not in calls.names, calls.names
        assert [a.outcome for a in node.history("t0")] == ["succeeded"], node.history("t0")
    finally:
        node.close()
