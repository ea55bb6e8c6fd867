"""A server that is down, on the asyncio face: ``await ping()`` says so within ``op_timeout``
(whatever the client's own 30 s server selection), and ``from_config(..., check=True)`` -
synchronous, so it makes no round trip itself - has ``start()`` (``async with``) ping first:
a server that is down is a ``SchedulerUnavailable`` there, before any task starts, and the
scheduler closes the client it made. A server that stops answering once the node runs fails
a firing turn within ``op_timeout`` (retried; firing goes on when it answers again), and
that deadline is not handed on to the handlers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

import pymongo  # noqa: E402
from async_kit import until  # noqa: E402
from pymongo import AsyncMongoClient  # noqa: E402
from pymongo.errors import PyMongoError  # noqa: E402

from flowsched import (  # noqa: E402
    AsyncMongoScheduler,
    ScheduleItem,
    ScheduleKind,
    SchedulerUnavailable,
    SchedulingConfig,
)

pytestmark = pytest.mark.asyncio

QUICK = timedelta(milliseconds=400)
TIMER = ScheduleKind.TIMER


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_ping_fails_within_op_timeout_against_a_down_server(closed_port: int) -> None:
    # The client's own server selection waits 30 s; op_timeout bounds the ping.
    client: Any = AsyncMongoClient(f"mongodb://127.0.0.1:{closed_port}/?directConnection=true")
    scheduler = AsyncMongoScheduler(client["db"]["timers"], op_timeout=QUICK)
    started = time.monotonic()
    try:
        with pytest.raises(
            SchedulerUnavailable, match=rf"127\.0\.0\.1:{closed_port} unreachable: ping did not"
        ) as raised:
            await scheduler.ping()
    finally:
        await client.close()

    assert time.monotonic() - started < 5
    assert isinstance(raised.value.__cause__, PyMongoError)


async def test_ping_passes_when_the_server_answers() -> None:
    scheduler = AsyncMongoScheduler(mongomock.MongoClient()["db"]["timers"])

    assert await scheduler.ping() is None


def config_for(port: int) -> SchedulingConfig:
    return SchedulingConfig.from_string(
        f"""
        ipf-scheduler {{
          mongodb {{ uri = "mongodb://127.0.0.1:{port}/?directConnection=true",
                     database-name = scheduled }}
          flowsched.op-timeout = 400ms
        }}
        """
    )


async def test_from_config_with_check_fails_at_start_and_closes_its_client(
    closed_port: int,
) -> None:
    made: list[Any] = []

    def factory(uri: str, **options: Any) -> Any:
        made.append(AsyncMongoClient(uri, **options))
        return made[-1]

    scheduler = AsyncMongoScheduler.from_config(
        config_for(closed_port), check=True, client_factory=factory
    )  # no round trip yet: from_config is synchronous
    ran: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: ran.append(item.id))
    before = set(asyncio.all_tasks())

    with pytest.raises(SchedulerUnavailable, match="unreachable: ping did not take effect"):
        async with scheduler:
            ran.append("the body ran")  # pragma: no cover - must not

    assert ran == []
    assert {t for t in asyncio.all_tasks() - before if "flowsched" in t.get_name()} == set()
    with pytest.raises(pymongo.errors.InvalidOperation):  # closed: nothing left behind
        await made[0]["scheduled"].command("ping")
    with pytest.raises(SchedulerUnavailable, match="is closed"):
        await scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, scheduler.now()))


@pytest.mark.wire
async def test_from_config_with_check_starts_against_a_live_server(mongo_uri: str) -> None:
    database = f"flowsched_async_ping_{uuid.uuid4().hex[:8]}"
    config = SchedulingConfig.from_string(
        f'ipf-scheduler.mongodb {{ uri = "{mongo_uri}", database-name = {database} }}'
    )

    async with AsyncMongoScheduler.from_config(config, check=True) as scheduler:
        await scheduler.ping()
        assert await scheduler.get("none") is None
    with pymongo.MongoClient(mongo_uri) as client:
        client.drop_database(database)


async def test_a_start_against_a_down_server_keeps_trying_and_closes_within_bounds(
    closed_port: int,
) -> None:
    # Without check=True, start() makes no round trip (from_config(..., check=True) is the
    # fail-fast start, above): the node starts, each store call fails within op_timeout and
    # is retried with backoff (firing goes on once the server answers: the hung-server test
    # below), and aclose() ends it within its bounds all the same.
    client: Any = AsyncMongoClient(f"mongodb://127.0.0.1:{closed_port}/?directConnection=true")
    scheduler = AsyncMongoScheduler(
        client["db"]["timers"], op_timeout=QUICK, poll_interval=timedelta(milliseconds=100)
    )
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    began = time.monotonic()
    try:
        await scheduler.start()
        await scheduler.start()  # idempotent
        with pytest.raises(SchedulerUnavailable, match="unreachable"):
            await scheduler.ping()
        await scheduler.aclose()
    finally:
        await client.close()
    assert time.monotonic() - began < 10  # bounded by op_timeout, not server selection (30 s)


class HangingProxy:
    """A TCP proxy to the wire server that can hang: while ``answering`` is clear, it
    forwards nothing in either direction and its connections stay open - a server that stops
    answering, which no refused connection gives (the driver waits on such a socket with no
    timeout of its own)."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.answering = asyncio.Event()
        self.answering.set()
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pump = asyncio.create_task(self._pump(source, sink))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await source.read(65536):
                await self.answering.wait()
                sink.write(data)
                await sink.drain()
        sink.close()

    async def close(self) -> None:
        self.answering.set()
        for pump in list(self._pumps):
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._server is not None:
            self._server.close()


@pytest.mark.wire
async def test_a_hung_server_fails_a_firing_turn_within_op_timeout_then_firing_goes_on(
    mongo_uri: str, mongo_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Every round trip of the firing task is bounded by op_timeout, as the threaded
    # node's are: a hung server fails the call (logged, retried), it does not hold
    # the firing task for good; once the server answers again, items fire again.
    (host, port), *_ = pymongo.uri_parser.parse_uri(mongo_uri)["nodelist"]
    proxy = HangingProxy(host, port)
    listen = await proxy.start()
    client: Any = AsyncMongoClient(
        f"mongodb://127.0.0.1:{listen}/?directConnection=true&retryWrites=false", tz_aware=True
    )
    direct: Any = AsyncMongoClient(mongo_uri, tz_aware=True)
    fast = timedelta(milliseconds=100)
    node = AsyncMongoScheduler(
        client[mongo_db.name]["timers"], node_id="a", poll_interval=fast, op_timeout=QUICK
    )
    writer = AsyncMongoScheduler(direct[mongo_db.name]["timers"], node_id="writer")
    ran: list[str] = []

    async def record(item: ScheduleItem, attempt: int) -> None:
        ran.append(item.id)

    node.subscribe(TIMER, record)
    try:
        await node.start()
        await writer.schedule(ScheduleItem("before", TIMER, writer.now()))
        assert await until(lambda: ran == ["before"], 20)

        proxy.answering.clear()
        with caplog.at_level("WARNING", "flowsched.node"):
            await writer.schedule(ScheduleItem("during", TIMER, writer.now()))
            messages = lambda: [r.getMessage() for r in caplog.records]  # noqa: E731
            failed = lambda: any("unreachable" in m for m in messages())  # noqa: E731
            assert await until(failed, 10 * QUICK.total_seconds())
        assert ran == ["before"]

        proxy.answering.set()
        assert await until(lambda: ran == ["before", "during"], 30)
    finally:
        proxy.answering.set()
        await node.aclose()
        await client.close()
        await direct.close()
        await proxy.close()


async def test_a_handler_does_not_inherit_the_deadline_of_the_firing_tasks_calls() -> None:
    # The firing task bounds its own round trips by op_timeout; a delivery task spawned by it
    # must not carry that deadline into the handler's own driver calls (pymongo keeps it in a
    # context variable, which a task copies when it is created).
    from pymongo import _csot  # no public getter for the deadline in force

    seen: list[float | None] = []
    collection = mongomock.MongoClient(tz_aware=True)["db"][f"timers_{uuid.uuid4().hex[:6]}"]
    fast = timedelta(milliseconds=50)
    async with AsyncMongoScheduler(
        collection, node_id="a", poll_interval=fast, op_timeout=QUICK
    ) as node:

        async def handler(item: ScheduleItem, attempt: int) -> None:
            seen.append(_csot.get_timeout())

        node.subscribe(TIMER, handler)
        await node.schedule(ScheduleItem("t", TIMER, node.now()))
        assert await until(lambda: bool(seen), 10)
    assert seen == [None]
