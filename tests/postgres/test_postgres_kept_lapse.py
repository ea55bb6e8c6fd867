"""A kept attempt (a cancel or replace met its started delivery) whose node died (schema
version 5): past its claim's lease end, with no heartbeat of its node, it reads ``lapsed``
there, and goes with the history retention counted from then. A live node's is still
running (open); an outcome that still comes ends it as the run truly ended."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import psycopg
import pytest
from pg_kit import START, clock_of

from flowsched import ManualClock
from flowsched.outcomes import Completed
from flowsched.postgres.queries import Queries
from flowsched.postgres.schema import SCHEMA_VERSION, migrate
from flowsched.postgres.store import PostgresTimerStore
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.store.records import Settlement

LEASE = timedelta(seconds=30)
RETENTION = timedelta(days=1)
ROUTES = {"h:h"}


@pytest.fixture
def store(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[PostgresTimerStore]:
    with PostgresTimerStore(
        postgres_url,
        table=fresh_table(),
        clock=ManualClock(START),
        history_retention=RETENTION,
        pool_size=2,
    ) as store:
        yield store


def _rows(store: PostgresTimerStore) -> int:
    with store.pool.connection() as conn:
        row = conn.execute(f'SELECT count(*) FROM "{store.table}_history"').fetchone()
    assert row is not None
    return int(row[0])


def test_a_kept_attempt_with_no_outcome_lapses_at_its_lease_end_and_then_goes(
    store: PostgresTimerStore,
) -> None:
    store.put(ScheduleItem("x", ScheduleKind.TIMER, START, handler="h"))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    clock_of(store).advance(timedelta(seconds=2))
    assert store.remove("x")  # the run had started: its attempt is kept, open
    [kept] = store.history("x")
    assert (kept.ended, kept.outcome) == (None, None), kept
    clock_of(store).advance(LEASE)  # its node never answers
    [lapsed] = store.history("x")
    assert (lapsed.node, lapsed.started) == ("n1", START), lapsed
    assert (lapsed.ended, lapsed.outcome) == (claim.lease_until, "lapsed"), lapsed
    store.next_due(ROUTES)  # the retention's bite: not yet a day past the lease end
    assert _rows(store) == 1
    clock_of(store).advance(RETENTION)
    store.next_due(ROUTES)
    assert _rows(store) == 0 and store.history("x") == []


def test_a_live_nodes_kept_attempt_stays_open_and_its_outcome_ends_it(
    store: PostgresTimerStore,
) -> None:
    store.put(ScheduleItem("y", ScheduleKind.TIMER, START, handler="h"))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    assert store.remove("y")
    clock_of(store).advance(LEASE + timedelta(seconds=5))  # a slow handler on a live node
    store.heartbeat("n1", ROUTES, timedelta(seconds=10))
    [running] = store.history("y")
    assert (running.ended, running.outcome) == (None, None), running
    [late] = store.settle([Settlement(claim, Completed())])
    assert not late.applied  # stale for the row
    [ended] = store.history("y")
    assert (ended.ended, ended.outcome) == (START + LEASE + timedelta(seconds=5), "succeeded")
    clock_of(store).advance(RETENTION - timedelta(seconds=1))
    store.next_due(ROUTES)  # ended: counted from its end, not from its lease end
    assert _rows(store) == 1


def test_a_kept_attempt_lapses_once_its_nodes_heartbeat_expired(
    store: PostgresTimerStore,
) -> None:
    store.put(ScheduleItem("z", ScheduleKind.TIMER, START, handler="h"))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    store.heartbeat("n1", ROUTES, timedelta(seconds=10))
    assert store.remove("z")
    clock_of(store).advance(LEASE)
    store.heartbeat("n1", ROUTES, timedelta(seconds=10))
    assert store.history("z")[0].outcome is None  # past the lease, its node alive
    clock_of(store).advance(timedelta(seconds=11))  # no heartbeat since: it died
    [lapsed] = store.history("z")
    assert (lapsed.ended, lapsed.outcome) == (claim.lease_until, "lapsed"), lapsed


def test_version_5_adds_the_lease_column_and_its_index_idempotently(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    queries = Queries(table)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with conn.transaction():
            for name in ("schema_version_table", *(f"migration_{n}" for n in (1, 2, 3, 4))):
                conn.execute(queries[name])
            conn.execute(queries["schema_set_version"], {"version": 4})
        assert migrate(conn, table) == SCHEMA_VERSION >= 5
        assert migrate(conn, table) == SCHEMA_VERSION  # idempotent
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (f"{table}_history_kept",)
        ).fetchone()
        assert index is not None and "WHERE (ended IS NULL)" in index[0], index
