"""A started ``AsyncMongoScheduler`` advertises itself in ``<collection>_nodes`` exactly as a
``MongoScheduler`` does (one heartbeat definition, :mod:`flowsched.node.heartbeats`, writing
:func:`flowsched.mongo.nodes.heartbeat_document`): its routes, renewed every poll and at once
when a handler is added, the clock offset it measured against the server's, gone on
``aclose()`` - so ``flowsched timers stats`` / ``timers nodes`` (which read the namespace
through the CLI's document store, ``flowsched.mongo.store.TimerStore``) and the console list
it and the routes it serves."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from async_kit import mongomock_collection, until  # noqa: E402

from flowsched import AsyncMongoScheduler, ScheduleItem, ScheduleKind  # noqa: E402
from flowsched.mongo.inspection import collect_stats  # noqa: E402
from flowsched.mongo.nodes import live_nodes, node_ttl  # noqa: E402
from flowsched.mongo.store import TimerStore  # noqa: E402

pytestmark = pytest.mark.asyncio

TIMER = ScheduleKind.TIMER
POLL = timedelta(milliseconds=50)


@pytest.fixture
def collection() -> Any:
    return mongomock_collection()


def advertised(collection: Any) -> list[tuple[str, tuple[str, ...]]]:
    nodes = collection.database[f"{collection.name}_nodes"]
    return [(n.node_id, n.routes) for n in live_nodes(nodes, datetime.now(UTC))]


async def noop(item: ScheduleItem, attempt: int) -> None:
    return None


async def test_a_started_async_node_advertises_its_routes_until_it_closes(collection: Any) -> None:
    node = AsyncMongoScheduler(collection, node_id="async-a", poll_interval=POLL)
    node.register("alpha", noop)
    assert advertised(collection) == []  # built, not started: nothing advertised

    async with node:
        assert await until(lambda: advertised(collection) == [("async-a", ("h:alpha",))])
        nodes = collection.database[f"{collection.name}_nodes"]
        [document] = nodes.find()
        assert document["expires_at"] - document["renewed_at"] == node_ttl(POLL)
        assert document["clock_offset_ms"] is None  # mongomock has no clock to measure
        first = document["renewed_at"]
        assert await until(lambda: nodes.find_one()["renewed_at"] > first)  # every poll

    assert nodes.count_documents({}) == 0  # aclose() withdrew it


async def test_a_handler_added_is_advertised_at_once_not_at_the_next_poll(collection: Any) -> None:
    # A 30 s poll: the next regular beat is 30 s away; the new route must not wait for it.
    async with AsyncMongoScheduler(
        collection, node_id="async-a", poll_interval=timedelta(seconds=30)
    ) as node:
        node.register("alpha", noop)
        assert await until(lambda: advertised(collection) == [("async-a", ("h:alpha",))], 5)
        node.subscribe(TIMER, noop)
        assert await until(
            lambda: advertised(collection) == [("async-a", ("h:alpha", "k:TIMER"))], 5
        )


async def test_timers_stats_lists_the_async_node_as_serving_its_route(collection: Any) -> None:
    async with AsyncMongoScheduler(collection, node_id="async-a", poll_interval=POLL) as node:
        node.register("alpha", noop)
        await node.create_single_timer("later", timedelta(hours=1), "alpha")
        await node.create_single_timer("orphan", timedelta(hours=1), "beta")
        assert await until(lambda: advertised(collection) != [])

        stats = collect_stats(TimerStore(collection), datetime.now(UTC))  # as `timers stats`

    assert [n.node_id for n in stats.nodes] == ["async-a"]
    served = {r.route: r.served_by for r in stats.routes}
    assert served == {"h:alpha": ("async-a",), "h:beta": ()}
    assert [r.route for r in stats.unserved] == ["h:beta"]


async def test_the_heartbeat_carries_the_offset_its_server_clock_measured(
    collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server whose clock runs 1.5 s ahead of this host's (hello's localTime says so).
    def hello(name: str) -> dict[str, Any]:
        assert name == "hello"
        return {"ok": 1.0, "localTime": datetime.now(UTC) + timedelta(seconds=1.5)}

    monkeypatch.setattr(collection.database, "command", hello)
    nodes = collection.database[f"{collection.name}_nodes"]
    async with AsyncMongoScheduler(collection, node_id="async-a", poll_interval=POLL) as node:
        node.subscribe(TIMER, noop)
        assert await until(lambda: (nodes.find_one() or {}).get("clock_offset_ms") is not None)
        offset = nodes.find_one()["clock_offset_ms"]
    assert 1400 <= offset <= 1600, offset


# -- the wire server: the same heartbeat through pymongo's AsyncMongoClient -------------------


@pytest.fixture
def names(mongo_db: Any) -> Iterator[tuple[str, str]]:
    yield mongo_db.name, f"timers_{uuid.uuid4().hex[:8]}"


@pytest_asyncio.fixture
async def wire_collection(mongo_uri: str, names: tuple[str, str]) -> AsyncIterator[Any]:
    from pymongo import AsyncMongoClient

    client: Any = AsyncMongoClient(mongo_uri, tz_aware=True)
    yield client[names[0]][names[1]]
    await client.close()


@pytest.mark.wire
async def test_on_the_server_an_async_node_advertises_itself_with_its_clock_offset(
    wire_collection: Any, mongo_db: Any, names: tuple[str, str]
) -> None:
    nodes = mongo_db[f"{names[1]}_nodes"]  # read with the synchronous client, as the CLI does
    async with AsyncMongoScheduler(
        wire_collection, node_id="async-wire", poll_interval=timedelta(milliseconds=200)
    ) as node:
        node.register("alpha", noop)

        def listed() -> bool:
            found = live_nodes(nodes, datetime.now(UTC))
            return [(n.node_id, n.routes) for n in found] == [("async-wire", ("h:alpha",))] and (
                found[0].clock_offset is not None  # measured against the server's clock
            )

        assert await until(listed, 20)
    assert nodes.count_documents({}) == 0
