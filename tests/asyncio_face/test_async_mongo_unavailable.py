"""A server that is down, on the asyncio face: ``await ping()`` says so within ``op_timeout``
(whatever the client's own 30 s server selection), and ``from_config(..., check=True)`` -
synchronous, so it makes no round trip itself - has ``start()`` (``async with``) ping first:
a server that is down is a ``SchedulerUnavailable`` there, before any task starts, and the
scheduler closes the client it made."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

import pymongo  # noqa: E402
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


async def test_a_start_that_could_not_reach_the_server_is_tried_again_by_the_next_start(
    closed_port: int,
) -> None:
    client: Any = AsyncMongoClient(f"mongodb://127.0.0.1:{closed_port}/?directConnection=true")
    scheduler = AsyncMongoScheduler(client["db"]["timers"], op_timeout=QUICK)
    try:
        for _ in range(2):  # not "already started": the second start fails the same way
            with pytest.raises(SchedulerUnavailable, match="unreachable: start did not"):
                await scheduler.start()
        await scheduler.aclose()
    finally:
        await client.close()
