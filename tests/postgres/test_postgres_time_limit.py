"""A PostgreSQL call gives up after op_timeout even when the server does not answer
(flowsched.postgres.time_limit): a read says SchedulerUnavailable, a write OutcomeUnknown,
and the connection it was cut on is never handed out again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from flowsched import OutcomeUnknown, SchedulerUnavailable
from flowsched.postgres import AsyncPostgresTimerStore, PostgresTimerStore
from flowsched.postgres.plans import Plan, Statement


def slow() -> Plan[object]:
    rows = yield Statement("SELECT pg_sleep(5), pg_backend_pid()")
    return rows


def backend() -> Plan[object]:
    rows = yield Statement("SELECT pg_backend_pid()")
    return rows[0][0]


@pytest.mark.parametrize("write", [False, True])
def test_a_call_with_no_reply_gives_up_and_its_connection_goes(
    postgres_url: str, fresh_table: Callable[[], str], write: bool
) -> None:
    with PostgresTimerStore(
        postgres_url, table=fresh_table(), op_timeout=0.5, pool_size=1
    ) as store:
        before = store._run(backend(), "backend", False)
        expected = OutcomeUnknown if write else SchedulerUnavailable
        with pytest.raises(expected, match=r"no reply within 0\.5 s"):
            store._run(slow(), "slow", write)
        assert store._run(backend(), "backend", False) != before  # a new connection


def test_the_async_face_gives_up_too(postgres_url: str, fresh_table: Callable[[], str]) -> None:
    async def run() -> tuple[object, object]:
        store = AsyncPostgresTimerStore(
            postgres_url, table=fresh_table(), op_timeout=0.5, pool_size=1
        )
        async with store:
            before = await store._run(backend(), "backend", False)
            with pytest.raises(OutcomeUnknown, match="may or may not have taken effect"):
                await store._run(slow(), "slow", True)
            return before, await store._run(backend(), "backend", False)

    before, after = asyncio.run(run())
    assert after != before
