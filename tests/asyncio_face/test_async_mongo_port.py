"""``AsyncMongoScheduler`` keeps every guarantee of the port's asyncio face: on mongomock
(its calls run inline by the asyncio driver: fast, always) and on the server at
``FLOWSCHED_MONGO_URI`` (pymongo's ``AsyncMongoClient``)."""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from flowsched import AsyncMongoScheduler, ManualClock, RedeliveryPolicy  # noqa: E402
from flowsched.testing import check_async_scheduler_port  # noqa: E402

URI = os.environ.get("FLOWSCHED_MONGO_URI")


def on_mongomock(clock: ManualClock, **options: Any) -> AsyncMongoScheduler:
    collection = mongomock.MongoClient(tz_aware=True)["flowsched"][uuid.uuid4().hex]
    return AsyncMongoScheduler(collection, node_id="test", clock=clock, **options)


def test_on_mongomock_it_keeps_every_guarantee() -> None:
    check_async_scheduler_port(
        on_mongomock,
        redelivery_factory=lambda clock, policy: on_mongomock(clock, redelivery=policy),
    )


@pytest.mark.wire
@pytest.mark.skipif(not URI, reason="needs FLOWSCHED_MONGO_URI")
def test_on_the_server_it_keeps_every_guarantee() -> None:
    from pymongo import AsyncMongoClient

    database = f"flowsched_async_port_{uuid.uuid4().hex[:10]}"

    def on_server(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> Any:
        client: Any = AsyncMongoClient(URI, tz_aware=True)
        collection = client[database][uuid.uuid4().hex[:12]]
        return AsyncMongoScheduler(collection, node_id="test", clock=clock, redelivery=policy)

    check_async_scheduler_port(on_server, redelivery_factory=on_server)


@pytest.mark.asyncio
async def test_from_config_runs_plain_handlers_on_workers_threads() -> None:
    """``ipf-scheduler.flowsched.workers`` is the handler threads on both faces: the async
    face ignored it (plain handlers ran on the loop's default executor)."""
    import asyncio
    import threading

    from flowsched import SchedulingConfig

    config = SchedulingConfig.from_string(
        'ipf-scheduler { mongodb { uri = "mongodb://h/db" }, flowsched { workers = 2 } }'
    )
    client = mongomock.MongoClient(tz_aware=True)
    scheduler = AsyncMongoScheduler.from_config(
        config, client_factory=lambda uri, **options: client, node_id="w"
    )
    running, most, names = 0, 0, set()
    lock = threading.Lock()

    def plain(item: Any, attempt: int) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            names.add(threading.current_thread().name)
        threading.Event().wait(0.05)
        with lock:
            running -= 1

    scheduler.register("plain", plain)
    scheduler._owned_client = None  # mongomock's client has no async close
    async with scheduler:
        for n in range(6):
            await scheduler.create_single_timer(f"t-{n}", timedelta(0), "plain")
        for _ in range(500):  # until all six ran (5 s at most)
            if not [n for n in range(6) if await scheduler.exists(f"t-{n}")]:
                break
            await asyncio.sleep(0.01)
    assert len(names) >= 1 and not await scheduler.exists("t-0")
    assert all(name.startswith("flowsched-handler") for name in names), names
    assert 1 <= most <= 2
