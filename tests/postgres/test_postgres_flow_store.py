"""``AsyncPostgresFlowStore`` keeps instances as the synchronous one does (the synchronous
one runs the shared flow-store tests, tests/flow/test_flow_store.py): versions fence updates."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from flowsched.errors import ConcurrentUpdateError, FlowAlreadyExistsError
from flowsched.flow import FlowInstance
from flowsched.postgres import AsyncPostgresFlowStore

T0 = datetime(2026, 3, 1, 9, 30, 0, 123456, tzinfo=UTC)


def test_the_async_store_inserts_loads_and_fences_updates(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    async def main() -> None:
        store = AsyncPostgresFlowStore(postgres_url, table=fresh_table(), pool_size=1)
        try:
            instance = FlowInstance(
                "tx-1", "Payment", "Started", 1, T0, {"Started": T0}, data={"n": 1}
            )
            stored = await store.insert(instance)
            assert stored.version == 1
            assert await store.load("tx-1") == stored
            with pytest.raises(FlowAlreadyExistsError):
                await store.insert(instance)
            updated = await store.update(stored.evolve(state="Done"))
            assert updated.version == 2 and (await store.load("tx-1")) == updated
            with pytest.raises(ConcurrentUpdateError):
                await store.update(stored.evolve(state="Lost"))
            assert await store.load("nope") is None
        finally:
            await store.aclose()

    asyncio.run(main())
