"""The library creates and upgrades its tables itself: versioned, idempotent, safe when many
nodes start together; a table from a newer flowsched is refused; the claim uses its index;
``flowsched db migrate`` does it by hand and prints the version; version 6 adds the count of
lost runs (``lapses``) to the rows of an older table, kept, as 0."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from typer.testing import CliRunner

from flowsched.cli import build_app
from flowsched.clock import ManualClock
from flowsched.postgres.queries import Queries, check_table_name, statement_names
from flowsched.postgres.schema import MIGRATIONS, SCHEMA_VERSION, migrate
from flowsched.postgres.store import PostgresTimerStore


def test_migrating_twice_changes_nothing_and_says_the_version(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn, table) == SCHEMA_VERSION
        stamp = conn.execute(f'SELECT migrated_at FROM "{table}_schema"').fetchall()
        assert migrate(conn, table) == SCHEMA_VERSION
        assert conn.execute(f'SELECT migrated_at FROM "{table}_schema"').fetchall() == stamp


def test_nodes_starting_together_all_migrate_without_error(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    errors: list[BaseException] = []
    versions: list[int] = []
    start = threading.Barrier(6)

    def node() -> None:
        try:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                start.wait()
                versions.append(migrate(conn, table))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=node) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and versions == [SCHEMA_VERSION] * 6


def test_a_table_from_a_newer_flowsched_is_refused_naming_both_versions(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        migrate(conn, table)
        conn.execute(f'UPDATE "{table}_schema" SET version = 99')
        with pytest.raises(RuntimeError, match=f"version 99.*up to version {SCHEMA_VERSION}"):
            migrate(conn, table)


def test_the_claim_reads_the_partial_index_not_the_table(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    queries = Queries(table)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        migrate(conn, table)
        conn.execute(
            f"""INSERT INTO "{table}" (id, generation, kind, handler, route, due, scheduled_at)
            SELECT 'i' || n, n, 'TIMER',
                   CASE WHEN n % 2 = 0 THEN NULL ELSE 'x' END,
                   CASE WHEN n % 2 = 0 THEN 'k:TIMER' ELSE 'h:x' END,
                   now() - n * interval '1 s', now()
            FROM generate_series(1, 5000) AS n"""
        )
        conn.execute(f'ANALYZE "{table}"')
        params = {
            "routes": ["k:TIMER"],
            "owner": "n",
            "lease": "30 s",
            "limit": 100,
            "keep": 20,
            "now": None,
            "firing_commit": None,
        }
        plan = conn.execute(b"EXPLAIN " + queries["claim_due"].encode(), params).fetchall()
    text = "\n".join(str(row[0]) for row in plan)
    assert f"{table}_claim" in text, text
    assert f"Seq Scan on {table} " not in text, text


def test_table_names_are_checked_before_any_sql() -> None:
    assert check_table_name("flowsched_timers") == "flowsched_timers"
    for bad in ("Timers", "1abc", 'x"; DROP TABLE y; --', "", "a" * 49, None):
        with pytest.raises(ValueError, match="table"):
            check_table_name(bad)
    assert "claim_due" in statement_names() and "settle" in statement_names()


def test_db_migrate_prints_the_version_and_is_idempotent(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(build_app(), ["db", "migrate", postgres_url, "--table", table])
        assert result.exit_code == 0, result.output
        assert result.stdout == f"{table}: schema version {SCHEMA_VERSION}\n"


def test_db_migrate_refuses_a_bad_table_or_url_naming_it() -> None:
    runner = CliRunner()
    result = runner.invoke(build_app(), ["db", "migrate", "postgresql://x@h/d", "--table", "A-b"])
    assert result.exit_code == 2 and "--table" in result.stderr
    result = runner.invoke(build_app(), ["db", "migrate", "mongodb://h/d"])
    assert result.exit_code == 2 and "postgresql://" in result.stderr


@pytest.mark.parametrize(("firing_commit", "seen"), [("off", "off"), (None, "on")])
def test_the_firing_paths_writes_set_synchronous_commit_for_their_own_transaction(
    postgres_url: str, fresh_table: Callable[[], str], firing_commit: str | None, seen: str
) -> None:
    table = fresh_table()
    queries = Queries(table)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        migrate(conn, table)
        conn.execute(
            f"""INSERT INTO "{table}" (id, generation, kind, route, due, scheduled_at)
            VALUES ('a', 1, 'TIMER', 'k:TIMER', now(), now())"""
        )
        params = {
            "routes": ["k:TIMER"],
            "owner": "n",
            "lease": "30 s",
            "limit": 10,
            "keep": 20,
            "now": None,
            "firing_commit": firing_commit,
        }
        with conn.transaction():
            assert len(conn.execute(queries["claim_due"], params).fetchall()) == 1
            assert conn.execute("SHOW synchronous_commit").fetchone() == (seen,)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",), "leaked"


def test_a_version_5_table_gets_the_count_of_lost_runs_and_keeps_its_rows(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    queries = Queries(table)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    lease = timedelta(seconds=30)
    assert MIGRATIONS[5] == "migration_6" and SCHEMA_VERSION >= 6
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(queries["schema_version_table"])
            for name in MIGRATIONS[:5]:
                conn.execute(queries[name])
            conn.execute(queries["schema_set_version"], {"version": 5})
        conn.execute(  # "idle" is due; "held" was started by a node of version 5, then lost
            f'INSERT INTO "{table}" (id, generation, kind, handler, route, due, owner, '
            "lease_until, claim_token, started_at, scheduled_at) VALUES "
            "('idle', 1, 'TIMER', 'h', 'h:h', %(due)s, NULL, NULL, NULL, NULL, %(due)s), "
            "('held', 2, 'TIMER', 'h', 'h:h', %(due)s, 'old-node', %(lease)s, 'tk', %(due)s, "
            "%(due)s)",
            {"due": start, "lease": start + lease},
        )
        assert migrate(conn, table) == SCHEMA_VERSION
        assert migrate(conn, table) == SCHEMA_VERSION  # idempotent
        rows = conn.execute(
            f'SELECT id, generation, owner, lapses FROM "{table}" ORDER BY id'
        ).fetchall()
        assert rows == [("held", 2, "old-node", 0), ("idle", 1, None, 0)], rows
        assert conn.execute(f'SELECT version FROM "{table}_schema"').fetchone() == (SCHEMA_VERSION,)
    clock = ManualClock(start + lease + timedelta(seconds=1))
    store = PostgresTimerStore(postgres_url, table=table, clock=clock, pool_size=1)
    try:  # the run the old node started and lost counts once the next claim takes it
        claims = {c.item.id: c for c in store.claim_due({"h:h"}, "new-node", lease, 10)}
        assert {key: c.lapsed for key, c in claims.items()} == {"held": 1, "idle": 0}
    finally:
        store.close()
