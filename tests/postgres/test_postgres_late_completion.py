"""A one-shot item's run that succeeds after its lease ended, while another node claimed the
same form again, still completes the item - settled by id and generation - and
``Observer.late_completion`` is told the time past its own lease end; a run whose item was
replaced or cancelled meanwhile settles nothing and is no late completion (CONTRACT section
15; docs/explanation/reliability.md, "Pauses past the lease")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from pg_kit import START, clock_of, clocked_store

from flowsched import ManualClock, PostgresScheduler
from flowsched.delivery import Observer
from flowsched.outcomes import Completed, NextSlot, Redeliver
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.store import PostgresTimerStore
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.store.records import Settlement

LEASE = timedelta(seconds=30)
ROUTES = frozenset({"h:h"})


def _item(item_id: str, due: datetime = START, **kwargs: Any) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, due, handler="h", **kwargs)


@pytest.fixture
def store(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[PostgresTimerStore]:
    with clocked_store(postgres_url, fresh_table()) as store:
        yield store


def test_a_late_completion_settles_its_generation_although_another_node_started_it(
    store: PostgresTimerStore,
) -> None:
    store.put(_item("x"))
    [paused] = store.claim_started(ROUTES, "a", LEASE, 10)
    clock_of(store).advance(LEASE + timedelta(seconds=1))  # a's handler outlives its lease
    [taken] = store.claim_started(ROUTES, "b", LEASE, 10)  # ...and b takes the item over
    assert taken.lapsed == 1, taken
    clock_of(store).advance(timedelta(seconds=4))

    [failed] = store.settle([Settlement(paused, Redeliver(START, 1, "E: failed"))])
    assert not failed.applied, "a failure of a claim that no longer holds applied"
    [late] = store.settle([Settlement(paused, Completed())])  # a's run succeeded, late

    assert late.applied and late.late == timedelta(seconds=5), late  # past a's own lease
    assert not store.exists("x") and store.dead_letters() == []
    [after] = store.settle([Settlement(taken, Completed())])  # b's: nothing left to settle
    assert not after.applied and not store.exists("x")
    # a's attempt lapsed at b's claim; b's, met by the late completion, is kept and then
    # ended by its own outcome.
    attempts = [(a.node, a.outcome) for a in store.history("x")]
    assert attempts == [("a", "lapsed"), ("b", "succeeded")], attempts


def test_a_late_completion_never_touches_a_replaced_or_cancelled_form(
    store: PostgresTimerStore,
) -> None:
    store.put(_item("replaced"))
    store.put(_item("cancelled"))
    claims = {c.item.id: c for c in store.claim_started(ROUTES, "a", LEASE, 10)}
    replacement = store.put(_item("replaced", payload={"v": 2}))
    assert store.remove("cancelled") is True
    clock_of(store).advance(LEASE + timedelta(seconds=1))

    results = store.settle([Settlement(c, Completed()) for c in claims.values()])

    assert [r.applied for r in results] == [False, False], results
    assert store.get("replaced") == replacement and not store.exists("cancelled")


def test_a_recurring_items_stale_settle_stays_stale(store: PostgresTimerStore) -> None:
    every = Recurrence.every(timedelta(minutes=1)).anchored(START - timedelta(minutes=3))
    store.put(_item("r", recurrence=every))
    [paused] = store.claim_started(ROUTES, "a", LEASE, 10)
    clock_of(store).advance(LEASE + timedelta(seconds=1))
    [taken] = store.claim_started(ROUTES, "b", LEASE, 10)
    slot = paused.item.due
    [stale] = store.settle([Settlement(paused, NextSlot(slot, START + timedelta(minutes=5)))])
    assert not stale.applied, "a recurring slot settled by a claim that no longer holds"
    [done] = store.settle([Settlement(paused, Completed())])  # its recurrence ended, say
    assert not done.applied and store.exists("r"), "a recurring item completed by a lapsed claim"
    [settled] = store.settle([Settlement(taken, NextSlot(slot, START + timedelta(minutes=5)))])
    assert settled.applied


def test_the_async_store_settles_a_late_completion_too(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    async def scenario() -> None:
        clock = ManualClock(START)
        store = AsyncPostgresTimerStore(postgres_url, table=fresh_table(), clock=clock)
        try:
            await store.put(_item("x"))
            [paused] = await store.claim_due(ROUTES, "a", LEASE, 10)
            assert await store.confirm_start([paused]) == [paused]
            clock.advance(LEASE + timedelta(seconds=2))
            [taken] = await store.claim_due(ROUTES, "b", LEASE, 10)
            [late] = await store.settle([Settlement(paused, Completed())])
            assert late.applied and late.late == timedelta(seconds=2), late
            assert not await store.exists("x")
            [after] = await store.settle([Settlement(taken, Completed())])
            assert not after.applied
        finally:
            await store.aclose()

    asyncio.run(scenario())


class Lates(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, timedelta]] = []

    def late_completion(self, item: ScheduleItem, attempt: int, late: timedelta) -> None:
        self.seen.append((item.id, attempt, late))


def test_the_scheduler_reports_a_taken_over_run_late_by_the_time_past_its_own_lease(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    clock, observer, table = ManualClock(START), Lates(), fresh_table()
    with (
        PostgresScheduler(
            postgres_url,
            table=table,
            clock=clock,
            node_id="a",
            lease=LEASE,
            observer=observer,
            listen=False,
        ) as a,
        PostgresTimerStore(postgres_url, table=table, clock=clock, pool_size=2) as b,
    ):

        def paused(item: ScheduleItem, attempt: int) -> None:
            if item.id == "x":
                clock.advance(LEASE + timedelta(seconds=1))  # a paused: b takes over
                assert [c.item.id for c in b.claim_due(ROUTES, "b", LEASE, 10)] == ["x"]
                clock.advance(timedelta(seconds=4))
            else:  # past its lease, then cancelled: no late completion
                clock.advance(LEASE + timedelta(seconds=1))
                assert a.cancel(item.id)

        a.register("h", paused)
        a.schedule(_item("x"))
        assert a.run_due() == 1
        a.schedule(_item("cancelled", clock.now()))
        assert a.run_due() == 1

        assert observer.seen == [("x", 0, timedelta(seconds=5))]  # not the stored lease's
        assert not a.exists("x") and not a.exists("cancelled") and a.dead_letters() == []
