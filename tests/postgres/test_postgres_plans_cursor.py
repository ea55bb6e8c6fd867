"""The plans' statements go through one cursor per connection (flowsched.postgres.plans):
the same rows as a fresh cursor's, no rows for a statement that returns none, and a
statement refused by the server leaves the connection's next plans working."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from flowsched.postgres import plans
from flowsched.postgres.plans import Plan, Statement


def _two(sql_first: str) -> Plan[tuple[list[plans.Row], list[plans.Row]]]:
    first = yield Statement(sql_first)  # type: ignore[arg-type]
    second = yield Statement("SELECT g, g::text FROM generate_series(1, %(n)s) AS g", {"n": 3})
    return first, second


def test_one_cursor_per_connection_same_rows_and_none_for_no_result(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        first, second = plans.run(conn, _two("SET application_name = 'x'"), what="t", write=False)
        assert first == [] and second == [(1, "1"), (2, "2"), (3, "3")]
        cursor = conn._flowsched_cursor  # type: ignore[attr-defined]
        empty, again = plans.run(conn, _two("SELECT 1 WHERE false"), what="t", write=False)
        assert empty == [] and again == second
        assert conn._flowsched_cursor is cursor  # type: ignore[attr-defined]
        with psycopg.connect(postgres_url, autocommit=True) as other:
            plans.run(other, _two("SELECT 1"), what="t", write=False)
            assert other._flowsched_cursor is not cursor  # type: ignore[attr-defined]


def test_a_refused_statement_leaves_the_next_plans_working(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            plans.run(conn, _two("SELECT * FROM no_such_table_here"), what="t", write=False)
        with pytest.raises(psycopg.errors.DivisionByZero):
            plans.run(conn, _two("SELECT 1/0"), what="t", write=False, atomic=True)
        first, second = plans.run(conn, _two("SELECT 7"), what="t", write=False)
        assert first == [(7,)] and second[-1] == (3, "3")


def test_the_asyncio_face_the_same(postgres_url: str) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.UndefinedTable):
                await plans.run_async(conn, _two("SELECT * FROM no_such_t"), what="t", write=False)
            first, second = await plans.run_async(conn, _two("SELECT 7"), what="t", write=False)
            assert first == [(7,)] and second == [(1, "1"), (2, "2"), (3, "3")]
            cursor = conn._flowsched_cursor  # type: ignore[attr-defined]
            first, _ = await plans.run_async(
                conn, _two("SET search_path = public"), what="t", write=False
            )
            assert first == [] and conn._flowsched_cursor is cursor  # type: ignore[attr-defined]

    asyncio.run(main())
