"""``claim_started`` on PostgreSQL: the claim and the check before a start in one statement
(the node core's ``start_on_claim``). What it claims is started - its start stamped, its
history attempt open, by the store's clock - and nothing else is: a cancel or replace that
committed first wins, one that commits after finds a recorded start; a lapsed started claim
is closed "lapsed" by the next claim. Both scheduler faces use it and never confirm."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from pg_kit import START, clock_of, clocked_store

from flowsched import AsyncPostgresScheduler, ManualClock, PostgresScheduler
from flowsched.outcomes import Completed, Redeliver
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.store import PostgresTimerStore
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.store.records import Settlement

LEASE = timedelta(seconds=30)
ROUTES = {"h:h"}


def _item(item_id: str, **payload: Any) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, START, handler="h", payload=payload or None)


@pytest.fixture
def store(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[PostgresTimerStore]:
    with clocked_store(postgres_url, fresh_table()) as store:
        yield store


def test_what_it_claims_is_started_by_the_store_clock(store: PostgresTimerStore) -> None:
    for n in range(3):
        store.put(_item(f"t{n}"))
    claims = store.claim_started(ROUTES, "n1", LEASE, 2)
    assert [c.item.id for c in claims] == ["t0", "t1"], claims
    assert all(c.owner == "n1" and c.token and c.lease_until == START + LEASE for c in claims)
    for claim in claims:
        [attempt] = store.history(claim.item.id)
        assert (attempt.node, attempt.started, attempt.ended) == ("n1", START, None), attempt
        assert attempt.generation == claim.generation and attempt.attempt == 0
    assert store.history("t2") == [], "an item not claimed has a recorded start"
    assert [c.item.id for c in store.claim_started(ROUTES, "n2", LEASE, 5)] == ["t2"]
    results = store.settle([Settlement(c, Completed()) for c in claims])
    assert all(r.applied for r in results)
    assert [a.outcome for a in store.history("t0")] == ["succeeded"]


def test_a_cancel_or_replace_committed_first_wins(store: PostgresTimerStore) -> None:
    store.put(_item("gone"))
    store.put(_item("new", v=1))
    assert store.remove("gone")
    replaced = store.put(_item("new", v=2))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    assert claim.item.payload == {"v": 2} and claim.generation == replaced.generation
    assert store.history("gone") == [], "a cancelled form has a recorded start"
    assert len(store.history("new")) == 1, "the replaced form has a recorded start"


def test_a_cancel_after_the_claim_finds_the_start_recorded_before_it(
    store: PostgresTimerStore,
) -> None:
    store.put(_item("x"))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    clock_of(store).advance(timedelta(seconds=2))
    assert store.remove("x") is True
    [attempt] = store.history("x")
    assert attempt.started == START and attempt.ended is None, attempt
    [result] = store.settle([Settlement(claim, Completed())])
    assert not result.applied, "the cancelled form's outcome applied"


def test_a_lapsed_started_claim_is_closed_lapsed_by_the_next_claim(
    store: PostgresTimerStore,
) -> None:
    store.put(_item("x"))
    [dead] = store.claim_started(ROUTES, "dead-node", LEASE, 10)
    assert store.claim_started(ROUTES, "n2", LEASE, 10) == [], "claimed while held"
    clock_of(store).advance(LEASE + timedelta(seconds=1))
    [again] = store.claim_started(ROUTES, "n2", LEASE, 10)
    assert again.token != dead.token and again.attempt == dead.attempt
    first, second = store.history("x")
    assert (first.node, first.outcome, first.ended) == ("dead-node", "lapsed", START + LEASE)
    assert (second.node, second.outcome) == ("n2", None), second
    [stale] = store.settle([Settlement(dead, Redeliver(START, 1, "E: failed"))])
    assert not stale.applied, "the lapsed claim's failure settled over its re-claim"


def test_the_history_keeps_its_limit(postgres_url: str, fresh_table: Callable[[], str]) -> None:
    clock = ManualClock(START)
    with PostgresTimerStore(
        postgres_url, table=fresh_table(), clock=clock, history_limit=2, pool_size=2
    ) as store:
        for n in range(4):
            store.put(_item("x"))
            [claim] = store.claim_started(ROUTES, f"n{n}", LEASE, 1)
            store.settle([Settlement(claim, Completed())])
            clock.advance(timedelta(seconds=1))
        assert [a.node for a in store.history("x")] == ["n2", "n3"]


def test_the_async_store_claims_started_too(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    async def scenario() -> None:
        clock = ManualClock(START)
        async with AsyncPostgresTimerStore(postgres_url, table=fresh_table(), clock=clock) as s:
            await s.put(_item("x"))
            [claim] = await s.claim_started(ROUTES, "n1", LEASE, 10)
            [attempt] = await s.history("x")
            assert (attempt.node, attempt.started, attempt.ended) == ("n1", START, None)
            assert await s.claim_started(ROUTES, "n2", LEASE, 10) == []
            [result] = await s.settle([Settlement(claim, Completed())])
            assert result.applied

    asyncio.run(scenario())


def _no_confirm(*_: object) -> Any:
    raise AssertionError("confirm_start was called: the claim was not started as claimed")


def test_the_scheduler_starts_as_it_claims_and_never_confirms(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    clock = ManualClock(START)
    ran: list[str] = []
    with PostgresScheduler(postgres_url, table=fresh_table(), clock=clock, listen=False) as s:
        assert s._core.settings.start_on_claim
        s._pg_store.confirm_start = _no_confirm  # type: ignore[method-assign]
        s.register("h", lambda item, attempt: ran.append(item.id))
        s.schedule(_item("a"))
        s.schedule(_item("gone"))
        assert s.cancel("gone")
        s.run_due()
        assert ran == ["a"], ran
        assert [a.outcome for a in s.history("a")] == ["succeeded"]
        assert s.history("gone") == []


def test_the_async_scheduler_starts_as_it_claims_and_never_confirms(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    async def scenario() -> None:
        clock = ManualClock(START)
        ran: list[str] = []

        async def handler(item: ScheduleItem, attempt: int) -> None:
            ran.append(item.id)

        s = AsyncPostgresScheduler(postgres_url, table=fresh_table(), clock=clock, listen=False)
        try:
            await s._pg_store.open()
            assert s._core.settings.start_on_claim
            s._pg_store.confirm_start = _no_confirm  # type: ignore[method-assign]
            s.register("h", handler)
            await s.schedule(_item("a"))
            await s.schedule(_item("gone"))
            assert await s.cancel("gone")
            await s.run_due()
            assert ran == ["a"], ran
            assert [a.outcome for a in await s.history("a")] == ["succeeded"]
        finally:
            await s.aclose()

    asyncio.run(scenario())


def test_a_row_it_cannot_use_is_quarantined_and_its_attempt_closed(
    store: PostgresTimerStore,
) -> None:
    import psycopg

    store.put(_item("ok"))
    with store.pool.connection() as conn:
        conn.execute(  # a recurrence no flowsched can read (written by hand, say)
            f"""INSERT INTO "{store.table}" (id, generation, kind, handler, route, due,
                recurrence, scheduled_at)
            VALUES ('poison', 1, 'TIMER', 'h', 'h:h', %(due)s, '{{"cron": "nope"}}', %(due)s)""",
            {"due": START},
        )
    assert isinstance(conn, psycopg.Connection)
    assert [c.item.id for c in store.claim_started(ROUTES, "n1", LEASE, 10)] == ["ok"]
    [record] = store.quarantined()
    assert record.id == "poison" and not store.exists("poison")
    [attempt] = store.history("poison")
    assert (attempt.node, attempt.outcome) == ("n1", "failed"), attempt
    assert attempt.ended is not None and attempt.error_message == record.reason
