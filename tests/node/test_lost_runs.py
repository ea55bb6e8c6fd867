"""A run lost with its node twice in a row counts as a failed delivery (flowsched/node/lost.py):
the node does not call the handler again, the item follows its redelivery policy. The dead
nodes are simulated on the store itself: a claim started, never settled, its lease ended.
Over the reference store and the MongoDB timer store (mongomock); PostgreSQL's in
tests/postgres/test_postgres_lost_runs.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowsched import ManualClock, RedeliveryPolicy, ScheduleItem, ScheduleKind
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.lost import lost_slot
from flowsched.node.scheduler import NodeScheduler
from flowsched.recurrence import Recurrence
from flowsched.routes import name_route
from flowsched.store import Claim, MemoryTimerStore, TimerStore, as_async

LEASE = timedelta(seconds=30)
ROUTES = frozenset({name_route("work")})


def _mongomock_store(clock: ManualClock) -> TimerStore:
    mongomock = pytest.importorskip("mongomock")
    from flowsched.mongo import MongoTimerStore

    collection = mongomock.MongoClient(tz_aware=True).db[f"t_{uuid.uuid4().hex[:8]}"]
    return MongoTimerStore(collection, clock=clock)


STORES: dict[str, Callable[[ManualClock], TimerStore]] = {
    "memory": MemoryTimerStore,
    "mongomock": _mongomock_store,
}


@pytest.fixture(params=list(STORES))
def make_store(request: pytest.FixtureRequest) -> Callable[[ManualClock], TimerStore]:
    return STORES[request.param]


def _die_twice(store: TimerStore, clock: ManualClock) -> None:
    """Two nodes in turn claim the item, start it and die: their leases end unsettled."""
    for node in ("dead-1", "dead-2"):
        claims = store.claim_due(ROUTES, node, LEASE, 10)
        assert len(claims) == 1 and store.confirm_start(claims) == claims
        clock.jump(LEASE + timedelta(seconds=1))


def _node(
    make_store: Callable[[ManualClock], TimerStore], policy: RedeliveryPolicy, calls: list[int]
) -> tuple[NodeScheduler, TimerStore, ManualClock]:
    clock = ManualClock()
    store = make_store(clock)
    node = NodeScheduler(store, clock=clock, redelivery=policy, lease=LEASE)
    node.register("work", lambda item, attempt: calls.append(attempt))
    return node, store, clock


def test_a_handler_that_kills_its_node_runs_twice_then_is_dead_lettered(
    make_store: Callable[[ManualClock], TimerStore],
) -> None:
    calls: list[int] = []
    node, store, clock = _node(make_store, RedeliveryPolicy(max_attempts=1), calls)
    node.create_single_timer("x", timedelta(0), "work")
    _die_twice(store, clock)
    node.start()
    try:
        node.run_due()
        assert calls == [], "the handler was called a third time after two lost runs"
        [dead] = node.dead_letters()
        assert dead.item.id == "x" and "DeliveryLost" in dead.error, dead
        assert [a.outcome for a in node.history("x")][:2] == ["lapsed", "lapsed"]
    finally:
        node.close()


def test_the_last_lost_run_is_a_failure_redelivered_with_backoff(
    make_store: Callable[[ManualClock], TimerStore],
) -> None:
    calls: list[int] = []
    node, store, clock = _node(make_store, RedeliveryPolicy(initial=timedelta(seconds=5)), calls)
    node.create_single_timer("x", timedelta(0), "work")
    _die_twice(store, clock)
    node.start()
    try:
        node.run_due()
        assert calls == [] and node.exists("x"), "a lost run's item is redelivered, not run"
        clock.advance(timedelta(seconds=5))
        assert calls == [1], f"the redelivery ran as attempt {calls}, not [1]"
        assert not node.exists("x")
        outcomes = [a.outcome for a in node.history("x")]
        assert outcomes == ["lapsed", "lapsed", "failed", "succeeded"], outcomes
    finally:
        node.close()


def test_one_lost_run_is_free(
    make_store: Callable[[ManualClock], TimerStore],
) -> None:
    calls: list[int] = []
    node, store, clock = _node(make_store, RedeliveryPolicy(max_attempts=1), calls)
    node.create_single_timer("x", timedelta(0), "work")
    [claim] = store.claim_due(ROUTES, "dead-1", LEASE, 10)
    assert store.confirm_start([claim]) == [claim]
    clock.jump(LEASE + timedelta(seconds=1))
    node.start()
    try:
        node.run_due()
        assert calls == [0], "a node's death alone must not count against its item"
        assert node.dead_letters() == []
    finally:
        node.close()


def test_a_recurring_tick_lost_twice_counts_as_run_and_the_next_slot_runs(
    make_store: Callable[[ManualClock], TimerStore],
) -> None:
    calls: list[int] = []
    node, store, clock = _node(make_store, RedeliveryPolicy(max_attempts=1), calls)
    every = Recurrence.every(timedelta(minutes=1))
    node.schedule_recurring("tick", every, handler="work")
    clock.jump(timedelta(minutes=1))
    _die_twice(store, clock)
    node.start()
    try:
        node.run_due()
        assert calls == [], "the lost slot ran again"
        assert node.exists("tick") and node.dead_letters() == [], "a lost tick ended its item"
        clock.advance(timedelta(minutes=1))
        assert calls == [0], f"the next slot did not run: {calls}"
    finally:
        node.close()


def test_the_async_face_counts_lost_runs_too() -> None:
    async def main() -> tuple[list[int], list[Any]]:
        calls: list[int] = []
        clock = ManualClock()
        store = MemoryTimerStore(clock)
        policy = RedeliveryPolicy(max_attempts=1)
        node = AsyncNodeScheduler(as_async(store), clock=clock, redelivery=policy, lease=LEASE)

        async def work(item: ScheduleItem, attempt: int) -> None:
            calls.append(attempt)

        node.register("work", work)
        await node.create_single_timer("x", timedelta(0), "work")
        _die_twice(store, clock)
        await node.start()
        try:
            await node.run_due()
            return calls, await node.dead_letters()
        finally:
            await node.aclose()

    calls, dead = asyncio.run(main())
    assert calls == [] and len(dead) == 1 and "DeliveryLost" in dead[0].error, (calls, dead)


START = datetime(2026, 1, 1, tzinfo=UTC)


def _lapsed_tick(stored_due_s: float) -> Claim:
    every = Recurrence.every(timedelta(seconds=10), start=START)
    due = START + timedelta(seconds=stored_due_s)
    item = ScheduleItem("tick", ScheduleKind.TIMER, due, recurrence=every)
    return Claim(item, 0, "b", START + timedelta(minutes=5), "t", lapsed=1)


def test_a_lost_tick_counts_the_slot_its_run_took_even_when_newer_than_the_stored_one() -> None:
    # The item waited unclaimed past its stored slot (0 s): the lost run was claimed no later
    # than a lease (10 s) before this claim (25 s), so it took the slot of 10 s at the latest.
    # That slot counts as applied (it must not run twice); the one of 20 s still runs.
    taken = lost_slot(_lapsed_tick(0), START + timedelta(seconds=25), timedelta(seconds=10))
    assert taken.previous == START + timedelta(seconds=10) and taken.runs == 1, taken
    # Claimed again within a lease of its stored slot: that slot is the one the run took.
    fresh = lost_slot(_lapsed_tick(0), START + timedelta(seconds=12), timedelta(seconds=10))
    assert fresh.previous == START and fresh.runs == 1, fresh
