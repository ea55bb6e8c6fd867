"""``timers()``, ``pause`` and ``resume`` on the MongoDB-wire server, both faces: the queries
and conditional writes that mongomock only imitates."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from steering_kit import MIN, NOW, Face

from flowsched import AsyncMongoScheduler, ManualClock, ScheduleItem, ScheduleKind

pytestmark = pytest.mark.wire


def test_pages_pauses_and_two_nodes_on_the_wire(mongo_db: Any) -> None:
    clock = ManualClock(NOW)
    collection = mongo_db["timers"]
    node_a = Face("mongo", clock, collection, node_id="wire-a")
    node_b = Face("mongo", clock, collection, node_id="wire-b")
    try:
        node_a.on_timer()
        node_b.on_timer()
        for n in reversed(range(60)):
            node_a.schedule(f"w-{n:02d}", (n // 2 + 1) * MIN, flow_id=f"f-{n % 3}")
        expected = [f"w-{n:02d}" for n in range(60)]

        first = node_a.call("timers", limit=25)
        assert [t.id for t in first] == expected[:25]
        assert node_b.ids(limit=25) == expected
        assert node_b.ids(flow_id="f-1", id_prefix="w-0") == ["w-01", "w-04", "w-07"]
        assert node_a.call("pause", "w-00") and node_a.call("pause", "w-01")
        assert node_b.ids(state="paused") == ["w-00", "w-01"]

        clock.advance(40 * MIN)
        fired = node_a.fired_ids() + node_b.fired_ids()
        assert sorted(fired) == expected[2:]  # each once, on one node or the other
        assert node_a.call("exists", "w-00") and node_b.call("exists", "w-01")

        restarted = Face("mongo", clock, collection, node_id="wire-a-again")
        try:
            restarted.on_timer()
            clock.advance(10 * MIN)
            assert restarted.fired == []
            assert restarted.call("resume", "w-00") is True
            assert node_b.call("resume", "w-01") is True
            assert node_b.call("resume", "nobody") is False
            assert restarted.info("w-00").due == NOW + 50 * MIN  # overdue: due now
            clock.advance(MIN)
            everyone = node_a.fired_ids() + node_b.fired_ids() + restarted.fired_ids()
            assert sorted(everyone) == expected
        finally:
            restarted.close()
    finally:
        node_a.close()
        node_b.close()


@pytest.mark.asyncio
async def test_the_async_face_on_the_wire(mongo_uri: str) -> None:
    from pymongo import AsyncMongoClient

    client: Any = AsyncMongoClient(mongo_uri, tz_aware=True)
    database = client[f"fs_steer_{id(client):x}"]
    clock = ManualClock(NOW)
    fired: list[str] = []

    async def on_timer(item: ScheduleItem, attempt: int) -> None:
        fired.append(item.id)

    try:
        async with AsyncMongoScheduler(database["timers"], node_id="aw", clock=clock) as node:
            node.subscribe(ScheduleKind.TIMER, on_timer)
            for n in range(12):
                await node.schedule(ScheduleItem(f"a-{n:02d}", ScheduleKind.TIMER, NOW + n * MIN))
            assert await node.pause("a-03") is True
            page = await node.timers(limit=5)
            rest = [info.id async for info in node.iter_timers(limit=5, after=page.next)]
            assert [t.id for t in page] + rest == [f"a-{n:02d}" for n in range(12)]
            assert [t.id for t in (await node.timers(state="paused")).items] == ["a-03"]

            await clock.advance_async(20 * MIN)
            assert "a-03" not in fired and len(fired) == 11
            assert await node.resume("a-03") is True
            await clock.advance_async(timedelta(seconds=1))
            assert fired[-1] == "a-03"
    finally:
        await client.drop_database(database.name)
        await client.close()
