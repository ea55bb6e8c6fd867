"""The node's firing statements run on connections of their own, set to plan once and by index
only (``FIRING_SETTINGS``); the application's calls keep the server's planning; a pool the
application gives is used as it is; settings in the URL's ``options`` are kept."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from flowsched import SchedulerUnavailable
from flowsched.postgres import AsyncPostgresTimerStore, PostgresTimerStore
from flowsched.postgres.connections import FIRING_SETTINGS, firing_options

SETTINGS = "SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'), "
SETTINGS += "current_setting('enable_bitmapscan'), current_setting('statement_timeout')"
LEASE = timedelta(seconds=30)


def _claim_plan(conn: psycopg.Connection[Any], store: PostgresTimerStore) -> list[str]:
    step = next(store.setup.claim_started(["k:TIMER"], "node-a", LEASE, 64))
    sql = step.sql if isinstance(step.sql, bytes) else step.sql.encode()
    return [str(row[0]) for row in conn.execute(b"EXPLAIN " + sql, step.params).fetchall()]


def test_firing_statements_have_their_own_connections_and_settings(
    postgres_url: str, fresh_table: Any
) -> None:
    # The URL's own options (a statement timeout) stay, on both kinds of connection.
    url = postgres_url + ("&" if "?" in postgres_url else "?")
    url += "options=-c%20statement_timeout%3D7000"
    with PostgresTimerStore(url, table=fresh_table()) as store:
        assert store.claim_started(["k:TIMER"], "node-a", LEASE, 64) == []
        with store._firing.connection() as conn:
            assert conn.execute(SETTINGS).fetchone() == ("force_generic_plan", "off", "off", "7s")
            plan = "\n".join(_claim_plan(conn, store))
        # The table is empty: without the settings the claim's update reads it by a seq
        # scan and the history trim by a bitmap (a plan that, made generic now, would scan
        # the whole table at every claim once it has grown).
        assert "Seq Scan" not in plan and "Bitmap" not in plan, plan
        assert f"Index Scan using {store.table}_claim" in plan, plan
        with store.pool.connection() as conn:
            assert conn.execute(SETTINGS).fetchone() == ("auto", "on", "on", "7s")
            assert "Seq Scan" in "\n".join(_claim_plan(conn, store))


def test_a_store_used_only_for_calls_opens_no_firing_connection(
    postgres_url: str, fresh_table: Any
) -> None:
    with PostgresTimerStore(postgres_url, table=fresh_table()) as store:
        assert store.exists("nothing") is False
        # A ManualClock harness's question (with ``after``: an optional filter) is not one.
        assert store.next_due(["k:TIMER"], datetime.now(UTC)) is None
        assert store._firing.closed  # never opened
        assert store.next_due(["k:TIMER"]) is None
        assert not store._firing.closed
    assert store._firing.closed and store.pool.closed


def test_a_pool_given_serves_the_firing_statements_as_it_is(
    postgres_url: str, fresh_table: Any
) -> None:
    with ConnectionPool(postgres_url, kwargs={"autocommit": True}, open=True) as pool:
        store = PostgresTimerStore(pool, table=fresh_table())
        assert store._firing is pool
        assert store.claim_started(["k:TIMER"], "node-a", LEASE, 64) == []
        with pool.connection() as conn:
            assert conn.execute(SETTINGS).fetchone()[:3] == ("auto", "on", "on")  # type: ignore[index]
        store.close()
        assert not pool.closed  # the application's


def test_the_async_store_has_them_too(postgres_url: str, fresh_table: Any) -> None:
    async def main() -> None:
        async with AsyncPostgresTimerStore(postgres_url, table=fresh_table()) as store:
            assert await store.claim_started(["k:TIMER"], "node-a", LEASE, 64) == []
            assert store._firing is not None
            async with store._firing.connection() as conn:
                row = await (await conn.execute(SETTINGS)).fetchone()
                assert row is not None and row[:3] == ("force_generic_plan", "off", "off")
            async with store.pool.connection() as conn:
                row = await (await conn.execute(SETTINGS)).fetchone()
                assert row is not None and row[:3] == ("auto", "on", "on")
        assert store._firing is None

    asyncio.run(main())


@pytest.mark.parametrize(
    ("conninfo", "given"),
    [
        ("postgresql://a@h/d", ""),
        ("postgresql://a@h/d?options=-c%20work_mem%3D8MB", "-c work_mem=8MB"),
        ("host=h options='-c search_path=app'", "-c search_path=app"),
    ],
)
def test_firing_options_keep_the_given_ones_first(
    conninfo: str, given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGOPTIONS", raising=False)
    ours = " ".join(f"-c {name}={value}" for name, value in FIRING_SETTINGS.items())
    assert firing_options(conninfo) == f"{given} {ours}".strip()


def test_the_claim_is_planned_once_on_a_firing_connection(
    postgres_url: str, fresh_table: Any
) -> None:
    """psycopg prepares a statement at its fifth use; from then on the server keeps one
    (generic) plan of the claim on a firing connection, never a custom plan per claim."""
    from flowsched.postgres.plans import run

    with PostgresTimerStore(postgres_url, table=fresh_table()) as store:
        assert store.claim_started(["k:TIMER"], "node-a", LEASE, 64) == []  # opens them
        with store._firing.connection() as conn:
            for _ in range(8):
                plan = store.setup.claim_started(["k:TIMER"], "node-a", LEASE, 64)
                assert run(conn, plan, what="claim", write=True) == []
            rows = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%%claim_token = gen_random_uuid()%%'"
            ).fetchall()
    assert rows and all(custom == 0 and generic >= 1 for generic, custom in rows), rows


def test_settings_refused_at_connection_leave_the_firing_statements_on_the_pool(
    postgres_url: str, fresh_table: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """A pooler in between (PgBouncer refuses these startup options) or an old server: one
    warning naming the refusal, and the node's statements run on the pool (never a node
    that waits for connections that can never open)."""
    from flowsched.postgres import connections

    monkeypatch.setitem(connections.FIRING_SETTINGS, "plan_cache_mode", "bogus")
    with PostgresTimerStore(postgres_url, table=fresh_table(), op_timeout=5) as store:
        with caplog.at_level("WARNING", logger="flowsched.postgres"):
            assert store.claim_started(["k:TIMER"], "node-a", LEASE, 64) == []
            assert store.next_due(["k:TIMER"]) is None
        assert store._firing is store.pool
        [warning] = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert "plan_cache_mode" in warning and "run on the pool" in warning, warning

    async def main() -> None:
        async with AsyncPostgresTimerStore(postgres_url, table=fresh_table()) as store:
            assert await store.claim_started(["k:TIMER"], "node-a", LEASE, 64) == []
            assert store._firing is store.pool

    asyncio.run(main())


def test_a_closed_store_opens_no_firing_connection_again(
    postgres_url: str, fresh_table: Any
) -> None:
    store = PostgresTimerStore(postgres_url, table=fresh_table())
    store.close()
    with pytest.raises(SchedulerUnavailable):
        store.claim_started(["k:TIMER"], "node-a", LEASE, 64)
    assert store._firing.closed


def test_firing_options_fall_back_on_pgoptions(monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq reads PGOPTIONS only when no ``options`` is given, and the firing connections
    give one: it carries PGOPTIONS' settings (a search_path, say) then."""
    monkeypatch.setenv("PGOPTIONS", "-c search_path=app")
    assert firing_options("postgresql://a@h/d").startswith("-c search_path=app -c ")
    given = "postgresql://a@h/d?options=-c%20work_mem%3D8MB"
    assert firing_options(given).startswith("-c work_mem=8MB -c plan_cache_mode")
