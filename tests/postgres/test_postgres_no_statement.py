"""A call whose plan needs no statement (an id no item can have) is answered without a
connection, on both store faces: no pool is touched, opened or waited for."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from psycopg_pool import ConnectionPool

from flowsched.postgres import PostgresTimerStore
from flowsched.postgres.async_store import AsyncPostgresTimerStore

UNUSABLE = ["", "a\x00b", "x" * 2000]
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("item_id", UNUSABLE)
def test_sync_store_answers_an_unusable_id_without_its_pool(item_id: str) -> None:
    pool: ConnectionPool = ConnectionPool("postgresql://nobody@127.0.0.1:1/none", open=False)
    store = PostgresTimerStore(pool, migrate=False)  # a closed pool: any use of it raises
    assert store.get(item_id) is None
    assert store.exists(item_id) is False
    assert store.remove(item_id) is False
    assert store.remove_flow(item_id) == []
    assert store.requeue(item_id, NOW) is None
    assert store.history(item_id) == []
    assert store.pause(item_id) is False
    assert store.resume(item_id) is False


@pytest.mark.parametrize("item_id", UNUSABLE)
def test_async_store_answers_an_unusable_id_without_opening_its_pool(item_id: str) -> None:
    async def scenario() -> None:
        store = AsyncPostgresTimerStore("postgresql://nobody@127.0.0.1:1/none", op_timeout=1)
        assert await store.get(item_id) is None
        assert await store.exists(item_id) is False
        assert await store.remove(item_id) is False
        assert await store.requeue(item_id, NOW) is None
        assert await store.pause(item_id) is False
        with pytest.raises(RuntimeError, match="not opened yet"):
            store.pool  # noqa: B018 - never opened: no connection was asked for

    asyncio.run(scenario())
