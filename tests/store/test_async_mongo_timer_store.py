"""AsyncMongoTimerStore passes the store conformance suite on the wire server (mongomock has
no asyncio face), and refuses a synchronous collection."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest

from flowsched import ManualClock
from flowsched.testing import check_timer_store

mongomock = pytest.importorskip("mongomock")
pymongo = pytest.importorskip("pymongo")

from flowsched.mongo import AsyncMongoTimerStore, MongoTimerStore  # noqa: E402

WIRE = pytest.mark.skipif(
    not os.environ.get("FLOWSCHED_MONGO_URI"), reason="FLOWSCHED_MONGO_URI unset"
)


def test_refuses_a_synchronous_collection() -> None:
    with pytest.raises(TypeError, match="AsyncCollection"):
        AsyncMongoTimerStore(mongomock.MongoClient().db.t)
    with pytest.raises(TypeError, match="pymongo Collection"):
        MongoTimerStore(pymongo.AsyncMongoClient().db.t)  # type: ignore[arg-type]


@WIRE
def test_passes_on_the_wire_server() -> None:
    uri = os.environ["FLOWSCHED_MONGO_URI"]
    name = f"flowsched_astore_{uuid.uuid4().hex[:8]}"

    def fresh(clock: ManualClock) -> AsyncMongoTimerStore:
        # The suite drives it on a loop of its own: the client is made there, on first use.
        client: Any = pymongo.AsyncMongoClient(uri, tz_aware=True)
        return AsyncMongoTimerStore(client[name][f"t_{uuid.uuid4().hex[:8]}"], clock=clock)

    try:
        check_timer_store(fresh)
    finally:
        pymongo.MongoClient(uri).drop_database(name)


@WIRE
def test_passes_on_the_wire_server_on_its_own_time() -> None:
    uri = os.environ["FLOWSCHED_MONGO_URI"]
    name = f"flowsched_astore_{uuid.uuid4().hex[:8]}"

    def fresh() -> AsyncMongoTimerStore:
        client: Any = pymongo.AsyncMongoClient(uri, tz_aware=True)
        return AsyncMongoTimerStore(client[name][f"t_{uuid.uuid4().hex[:8]}"])

    try:
        check_timer_store(fresh)
    finally:
        pymongo.MongoClient(uri).drop_database(name)


@WIRE
def test_two_faces_share_one_collection() -> None:
    """What one face stores and claims, the other sees: the same documents and fences."""
    from datetime import timedelta

    from flowsched import ScheduleItem, ScheduleKind

    uri = os.environ["FLOWSCHED_MONGO_URI"]
    name = f"flowsched_astore_{uuid.uuid4().hex[:8]}"
    clock = ManualClock()
    sync = MongoTimerStore(pymongo.MongoClient(uri, tz_aware=True)[name].t, clock=clock)

    async def scenario() -> None:
        client: Any = pymongo.AsyncMongoClient(uri, tz_aware=True)
        store = AsyncMongoTimerStore(client[name].t, clock=clock)
        due = clock.now() - timedelta(seconds=1)
        await store.put(ScheduleItem("x", ScheduleKind.TIMER, due, handler="h"))
        [claim] = sync.claim_due({"h:h"}, "a", timedelta(seconds=30), 10)
        assert await store.claim_due({"h:h"}, "b", timedelta(seconds=30), 10) == []
        assert await store.confirm_start([claim]) == [claim]
        assert [a.ended for a in await store.history("x")] == [None]
        await client.close()

    try:
        asyncio.run(scenario())
    finally:
        pymongo.MongoClient(uri).drop_database(name)
