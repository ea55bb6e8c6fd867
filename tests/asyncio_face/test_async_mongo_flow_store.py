"""``AsyncMongoFlowStore`` (the library's, importable from ``flowsched``): the rules of
``MongoFlowStore`` on an ``AsyncCollection``, and the same documents (one store reads what
the other wrote)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from flowsched import (
    AsyncMongoFlowStore,
    ConcurrentUpdateError,
    FlowAlreadyExistsError,
    FlowInstance,
    MongoFlowStore,
)

pytestmark = pytest.mark.wire
T0 = datetime(2026, 1, 1, 9, 0, 0, 123456, tzinfo=UTC)


def _instance() -> FlowInstance:
    return FlowInstance(
        flow_id="tx-1",
        flow="Payment",
        state="CheckingFraud",
        entry=1,
        entered_at=T0,
        offsets={"CheckingFraud": T0},
    )


@pytest.mark.asyncio
async def test_insert_load_update_and_the_version_fence(mongo_db: Any, mongo_uri: str) -> None:
    from pymongo import AsyncMongoClient

    client: Any = AsyncMongoClient(mongo_uri, tz_aware=True)
    try:
        store = AsyncMongoFlowStore(client[mongo_db.name]["instances"])
        assert await store.load("tx-1") is None
        stored = await store.insert(_instance())
        assert stored.version == 1 and await store.load("tx-1") == stored
        with pytest.raises(FlowAlreadyExistsError, match="tx-1"):
            await store.insert(_instance())

        updated = await store.update(replace(stored, state="Approved", finished=True))
        assert updated.version == 2
        with pytest.raises(ConcurrentUpdateError, match="tx-1"):
            await store.update(replace(stored, state="Rejected"))

        # The synchronous store reads the same document.
        assert MongoFlowStore(mongo_db["instances"]).load("tx-1") == updated
    finally:
        await client.close()
