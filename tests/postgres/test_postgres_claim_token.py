"""The claim token on PostgreSQL: schema version 3 adds it (idempotently) to a version-2
table; a row claimed before the upgrade (no token) is held by nobody's fence, so its old
claim applies nothing and the row is claimed again, with a token, once its lease ends. The
token is fresh at every claim and kept by a renewal, on the sync and async faces alike (the
conformance suite checks the rest, see test_postgres_store.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg

from flowsched.clock import ManualClock
from flowsched.outcomes import Completed, Redeliver
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.queries import Queries
from flowsched.postgres.schema import SCHEMA_VERSION, migrate
from flowsched.postgres.store import PostgresTimerStore
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.store.records import Claim, Settlement

START = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def test_a_version_2_table_gets_the_token_and_its_claims_lapse(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    queries = Queries(table)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(queries["schema_version_table"])
        conn.execute(queries["migration_1"])
        conn.execute(queries["migration_2"])
        conn.execute(queries["schema_set_version"], {"version": 2})
        conn.execute(  # held by a node of version 2: owner and lease, no token
            f'INSERT INTO "{table}" (id, generation, kind, handler, route, due, owner, '
            "lease_until, scheduled_at) VALUES ('old', 1, 'TIMER', 'h', 'h:h', %(due)s, "
            "'old-node', %(lease)s, %(due)s)",
            {"due": START, "lease": START + LEASE},
        )
        assert migrate(conn, table) == SCHEMA_VERSION >= 3
        assert migrate(conn, table) == SCHEMA_VERSION  # idempotent
        assert conn.execute(f'SELECT claim_token FROM "{table}"').fetchall() == [(None,)]
    clock = ManualClock(START)
    store = PostgresTimerStore(postgres_url, table=table, clock=clock, pool_size=2)
    try:
        item = store.get("old")
        assert item is not None
        stale = Claim(item, 0, "old-node", START + LEASE)  # the old node's claim: no token
        assert store.confirm_start([stale]) == [], "a claim without a token confirmed"
        assert store.renew([stale], LEASE) == [], "a claim without a token renewed"
        assert store.claim_due({"h:h"}, "new-node", LEASE, 10) == [], "claimed while held"
        clock.advance(LEASE + timedelta(seconds=1))
        [claim] = store.claim_due({"h:h"}, "new-node", LEASE, 10)
        assert claim.token, f"a claim without a token: {claim}"
        [result] = store.settle([Settlement(stale, Redeliver(START, 1, "E: failed"))])
        assert not result.applied, "the pre-upgrade claim's failure settled over the new one"
        assert store.confirm_start([claim]) == [claim]
        [result] = store.settle([Settlement(claim, Completed())])
        assert result.applied and result.late is None and not store.exists("old")
    finally:
        store.close()


def test_the_async_store_keeps_the_token_through_a_renewal_and_changes_it_on_a_reclaim(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    async def scenario() -> None:
        clock = ManualClock(START)
        store = AsyncPostgresTimerStore(postgres_url, table=fresh_table(), clock=clock)
        try:
            await store.put(ScheduleItem("x", ScheduleKind.TIMER, START, handler="h"))
            [claim] = await store.claim_due({"h:h"}, "n", LEASE, 10)
            clock.advance(timedelta(seconds=10))
            [renewed] = await store.renew([claim], LEASE)
            assert renewed.token == claim.token and renewed.lease_until > claim.lease_until
            clock.advance(LEASE + timedelta(seconds=1))
            [again] = await store.claim_due({"h:h"}, "n", LEASE, 10)  # the same node
            assert again.token != claim.token, "a re-claim kept the lapsed claim's token"
            assert await store.renew([renewed], LEASE) == [], "the lapsed claim renewed"
            [stale, fresh] = await store.settle(
                [Settlement(renewed, Completed()), Settlement(again, Completed())]
            )
            assert not stale.applied and fresh.applied and fresh.late is None
        finally:
            await store.aclose()

    asyncio.run(scenario())
