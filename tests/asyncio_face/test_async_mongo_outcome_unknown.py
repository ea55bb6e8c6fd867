"""``AsyncMongoScheduler``: a write whose outcome is unknown says so, and a cancel whose
first reply was lost answers ``True`` (as ``MongoScheduler``: tests/mongo)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pymongo")
pytest.importorskip("mongomock")

from async_kit import mongomock_collection

sys.path.insert(0, str(Path(__file__).parent.parent / "mongo"))
from test_mongo_outcome_unknown import Wire

from flowsched import AsyncMongoScheduler, OutcomeUnknown, ScheduleItem, ScheduleKind

pytestmark = pytest.mark.asyncio


async def _node(wire: Wire, node_id: str) -> AsyncMongoScheduler:
    node = AsyncMongoScheduler(wire, node_id=node_id, op_timeout=timedelta(milliseconds=300))
    await node.store.now()  # measured (the Wire's hello): stamps and fences by its time
    assert node.store.sync.time.filter.samples  # mongomock: the sync store, run inline
    return node


def _item(payload: dict[str, Any]) -> ScheduleItem:
    due = datetime.now(UTC) + timedelta(hours=1)
    return ScheduleItem("t", ScheduleKind.TIMER, due, payload=payload)


async def test_unknown_outcomes_and_late_cancels_on_the_async_face() -> None:
    wire = Wire(mongomock_collection())
    a, b = await _node(wire, "a"), await _node(wire, "b")

    wire.lose["replace_one"] = 10**6
    with pytest.raises(OutcomeUnknown):
        await a.schedule(_item({"form": "old"}))
    wire.lose.clear()
    assert await a.exists("t")

    wire.lose["find_one_and_delete"] = 1
    assert await a.cancel("t") is True  # its first reply lost

    await a.schedule(_item({"form": "old"}))
    wire.hold.add("find_one_and_delete")
    with pytest.raises(OutcomeUnknown):
        await a.cancel("t")
    wire.hold.clear()
    newer = await b.schedule(_item({"form": "new"}))
    wire.deliver_held()
    assert await b.get("t") == newer
