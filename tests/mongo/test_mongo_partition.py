"""The partition case of CONTRACT section 15, on the wire server through a TCP fault proxy:
a cancel is held past its caller's ``op_timeout`` (the caller is told ``OutcomeUnknown``,
not that it did not take effect), another instance schedules the timer again, and the held
cancel reaches the server at the heal. It applies nothing: the new form stays and fires.

Instance ``a`` reaches the server through the proxy, instance ``b`` directly; ``b`` starts
firing only once the server has read everything the partition held
(:meth:`~flowsched.testing.fault_proxy.FaultProxy.wait_delivered`), so the held cancel has
certainly arrived before the new form could fire. ``a`` is a fresh instance, as a web
process that only schedules and cancels is, or a started node."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo")

from pymongo import AsyncMongoClient, MongoClient

from flowsched import (
    AsyncMongoScheduler,
    MongoScheduler,
    OutcomeUnknown,
    ScheduleItem,
    ScheduleKind,
    SchedulerUnavailable,
)
from flowsched.testing.fault_proxy import FaultProxy, upstream_of

pytestmark = pytest.mark.wire

QUICK = timedelta(seconds=1)  # a's op_timeout: how long the partition must hold its cancel
PATIENT = timedelta(seconds=20)  # b's: b is not partitioned (a slow server is not a fault)
TIMER = ScheduleKind.TIMER
SLOW = dict(poll_interval=timedelta(seconds=60))  # a fires nothing by itself meanwhile


def item(form: str, due_in: timedelta) -> ScheduleItem:
    return ScheduleItem("t", TIMER, datetime.now(UTC) + due_in, payload={"form": form})


@pytest.fixture
def proxy(mongo_uri: str) -> Iterator[FaultProxy]:
    with FaultProxy(*upstream_of(mongo_uri, 27017)) as running:
        yield running


def heal_and_deliver(proxy: FaultProxy) -> None:
    proxy.heal()
    assert proxy.wait_delivered(timeout=30), "the server did not read what the partition held"


SETUP_TRIES = 10  # a's first write (indexes, clock measurement) may outlast QUICK on a busy host


def wait_for(fired: list[Any], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not fired and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("a_runs", [False, True], ids=["a-schedules-only", "a-started"])
def test_a_held_cancel_spares_the_form_scheduled_again_which_fires(
    mongo_uri: str, mongo_db: Any, proxy: FaultProxy, a_runs: bool
) -> None:
    via: Any = MongoClient(proxy.via(mongo_uri), serverSelectionTimeoutMS=30_000)
    direct: Any = MongoClient(mongo_uri)
    a = MongoScheduler(via[mongo_db.name]["timers"], node_id="a", op_timeout=QUICK, **SLOW)
    b = MongoScheduler(direct[mongo_db.name]["timers"], node_id="b", op_timeout=PATIENT)
    fired: list[Any] = []
    b.subscribe(TIMER, lambda got, attempt: fired.append(got.payload))
    try:
        if a_runs:
            a.start()
        for attempt in range(SETUP_TRIES):  # before the partition: a replace, safe to repeat
            try:
                a.schedule(item("old", timedelta(hours=1)))
                break
            except SchedulerUnavailable:
                if attempt == SETUP_TRIES - 1:
                    raise
        proxy.partition()
        with pytest.raises(OutcomeUnknown, match="may or may not have taken effect"):
            a.cancel("t")  # held past op_timeout
        newer = b.schedule(item("new", timedelta(milliseconds=500)))
        heal_and_deliver(proxy)  # the held delete reaches the server now

        assert b.get("t") == newer  # the new form stays...
        b.start()
        wait_for(fired)
        assert fired == [{"form": "new"}]  # ...and fires
    finally:
        a.close()
        b.close()
        via.close()
        direct.close()


@pytest.mark.parametrize("a_runs", [False, True], ids=["a-schedules-only", "a-started"])
def test_the_async_face_a_held_cancel_spares_the_form_scheduled_again_which_fires(
    mongo_uri: str, mongo_db: Any, proxy: FaultProxy, a_runs: bool
) -> None:
    async def run() -> list[Any]:
        via: Any = AsyncMongoClient(proxy.via(mongo_uri), serverSelectionTimeoutMS=30_000)
        direct: Any = AsyncMongoClient(mongo_uri)
        a = AsyncMongoScheduler(via[mongo_db.name]["timers"], node_id="a", op_timeout=QUICK, **SLOW)
        b = AsyncMongoScheduler(direct[mongo_db.name]["timers"], node_id="b", op_timeout=PATIENT)
        fired: list[Any] = []
        b.subscribe(TIMER, lambda got, attempt: fired.append(got.payload))
        try:
            if a_runs:
                await a.start()
            for attempt in range(SETUP_TRIES):  # before the partition: safe to repeat
                try:
                    await a.schedule(item("old", timedelta(hours=1)))
                    break
                except SchedulerUnavailable:
                    if attempt == SETUP_TRIES - 1:
                        raise
            proxy.partition()
            with pytest.raises(OutcomeUnknown, match="may or may not have taken effect"):
                await a.cancel("t")
            newer = await b.schedule(item("new", timedelta(milliseconds=500)))
            await asyncio.to_thread(heal_and_deliver, proxy)

            assert await b.get("t") == newer
            await b.start()
            deadline = time.monotonic() + 30
            while not fired and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return fired
        finally:
            await a.aclose(timeout=5)
            await b.aclose(timeout=5)
            await via.close()
            await direct.close()

    assert asyncio.run(run()) == [{"form": "new"}]
