"""A recurring item's runs on PostgreSQL: schema version 2 adds them (rows of version 1 read
as 0), and the recurrence's ends (until, max_runs, calendar) and its runs survive the row,
its redelivery and its dead letter."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg

from flowsched.calendar import Calendar
from flowsched.outcomes import DeadLettered
from flowsched.postgres import PostgresTimerStore
from flowsched.postgres.queries import Queries
from flowsched.postgres.schema import SCHEMA_VERSION, migrate
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.store.records import Settlement

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _recurrence() -> Recurrence:
    calendar = Calendar(timezone="Europe/Berlin", weekdays_off=("SAT", "SUN"))
    return Recurrence.every(
        timedelta(hours=1), until=START + timedelta(days=30), max_runs=40, calendar=calendar
    ).anchored(START)


def test_a_version_1_table_is_upgraded_and_its_rows_read_as_0_runs(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    queries = Queries(table)
    every = Recurrence.every(timedelta(minutes=1), max_runs=3).anchored(START)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(queries["schema_version_table"])
        conn.execute(queries["migration_1"])
        conn.execute(queries["schema_set_version"], {"version": 1})
        conn.execute(
            f'INSERT INTO "{table}" (id, generation, kind, handler, route, due, recurrence, '
            "previous, scheduled_at) VALUES ('old', 1, 'TIMER', 'h', 'h:h', %(due)s, "
            "%(recurrence)s, %(due)s, %(due)s)",
            {"due": START, "recurrence": psycopg.types.json.Jsonb(every.to_json())},
        )
        assert migrate(conn, table) == SCHEMA_VERSION >= 3
        assert migrate(conn, table) == SCHEMA_VERSION  # idempotent
    store = PostgresTimerStore(postgres_url, table=table)
    try:
        old = store.get("old")
        assert old is not None and old.runs == 0 and old.recurrence == every
    finally:
        store.close()


def test_the_recurrence_ends_and_runs_survive_the_row_and_the_dead_letter(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    store = PostgresTimerStore(postgres_url, table=fresh_table())
    try:
        every = _recurrence()
        item = ScheduleItem(
            "r", ScheduleKind.TIMER, START, recurrence=every, handler="h", previous=START, runs=5
        )
        store.put(item)
        stored = store.get("r")
        assert stored is not None
        assert (stored.recurrence, stored.runs, stored.previous) == (every, 5, START)
        assert stored.recurrence is not None and stored.recurrence.calendar == every.calendar
        [claim] = store.claim_due({"h:h"}, "n1", timedelta(seconds=30), 10)
        assert claim.item.runs == 5
        dead = DeadLetter(claim.item, 3, "E: gave up", START)
        [result] = store.settle([Settlement(claim, DeadLettered(dead))])
        assert result.applied
        [letter] = store.dead_letters()
        assert (letter.item.runs, letter.item.recurrence) == (5, every)
        back = store.requeue("r", START)
        assert back is not None and back.runs == 5
        again = store.get("r")
        assert again is not None and again.runs == 5
    finally:
        store.close()
