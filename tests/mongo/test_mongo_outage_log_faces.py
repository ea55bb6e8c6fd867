"""An outage is logged once when it begins and once when it ends (with its length), on both
MongoDB faces: the node core's lines (``flowsched.node``), as on every store. (Both faces
back off over one range, the core's: ``tests/node/test_node_behaviour.py::
test_outage_backoff_doubles_from_a_tenth_of_a_second_up_to_the_poll``.)"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import mongomock
import pytest
from pymongo.errors import AutoReconnect
from test_mongo_outage import Flaky

from flowsched import AsyncMongoScheduler, MongoScheduler, ScheduleKind

POLL = timedelta(milliseconds=20)
DOWN, RECOVERED = "the store is unavailable", "the store answers again"


def _wait(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():
        time.sleep(0.01)
    return condition()


def _sync_outage(flaky: Flaky) -> None:
    node = MongoScheduler(flaky, node_id="n", poll_interval=POLL)  # type: ignore[arg-type]
    node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    with node:
        flaky.down = True
        assert _wait(lambda: flaky.failures >= 4)
        flaky.down = False
        assert _wait(lambda: any(RECOVERED in m for m in _messages()))


def _async_outage(flaky: Flaky) -> None:
    async def run() -> None:
        node = AsyncMongoScheduler(flaky, node_id="n", poll_interval=POLL)
        node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
        async with node:
            flaky.down = True
            while flaky.failures < 4:
                await asyncio.sleep(0.01)
            flaky.down = False
            while not any(RECOVERED in m for m in _messages()):
                await asyncio.sleep(0.01)

    asyncio.run(asyncio.wait_for(run(), 20))


_RECORDS: list[logging.LogRecord] = []


def _messages() -> list[str]:
    return [r.getMessage() for r in _RECORDS]


@pytest.mark.parametrize("face", [_sync_outage, _async_outage], ids=["sync", "async"])
def test_one_line_per_outage_and_one_when_it_ends(
    face: Callable[[Flaky], None], caplog: pytest.LogCaptureFixture
) -> None:
    collection: Any = mongomock.MongoClient(tz_aware=True)["flowsched"]["timers"]
    flaky = Flaky(collection, AutoReconnect("connection refused"))
    _RECORDS.clear()
    handler = logging.Handler()
    handler.emit = _RECORDS.append  # type: ignore[method-assign]
    logger = logging.getLogger("flowsched.node")
    logger.addHandler(handler)
    try:
        with caplog.at_level(logging.INFO, "flowsched.node"):
            face(flaky)
    finally:
        logger.removeHandler(handler)

    warnings = [m for m in _messages() if DOWN in m or RECOVERED in m]
    assert len([m for m in warnings if DOWN in m]) == 1, warnings
    assert len([m for m in warnings if RECOVERED in m]) == 1, warnings
