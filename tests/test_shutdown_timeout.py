"""``close()`` / ``aclose()`` wait for handlers in flight at most ``shutdown_timeout`` (a
constructor setting and ``ipf-scheduler.flowsched.shutdown-timeout``), then return, logging
the items left running - on all four schedulers. (One hung handler held ``with scheduler:``
and ``async with scheduler:`` for ever.) Each test hangs a handler on an event it releases
only after the close has returned; pytest-timeout fails a close that never returns."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from flowsched import (
    AsyncInMemoryScheduler,
    AsyncMongoScheduler,
    InMemoryScheduler,
    MongoScheduler,
    SchedulingConfig,
)

mongomock = pytest.importorskip("mongomock")

pytestmark = pytest.mark.timeout(60)
SHORT = timedelta(milliseconds=200)
FAST = timedelta(milliseconds=50)


def _collection() -> Any:
    return mongomock.MongoClient(tz_aware=True)["shutdown"]["timers"]


SYNC: dict[str, Callable[[], Any]] = {
    "memory": lambda: InMemoryScheduler.from_config(
        SchedulingConfig.from_string("ipf-scheduler.flowsched.shutdown-timeout = 200ms")
    ),
    "mongo": lambda: MongoScheduler(
        _collection(), poll_interval=FAST, push_wakeup=False, shutdown_timeout=SHORT
    ),
}
ASYNC: dict[str, Callable[[], Any]] = {
    "async-memory": lambda: AsyncInMemoryScheduler(shutdown_timeout=SHORT),
    "async-mongo": lambda: AsyncMongoScheduler(
        _collection(), poll_interval=FAST, push_wakeup=False, shutdown_timeout=SHORT
    ),
}


def left_running(caplog: pytest.LogCaptureFixture, adapter: str = "memory") -> list[str]:
    """The close's line naming the items left running: the in-memory schedulers' own
    (``flowsched.shutdown``), or - the MongoDB faces, on the node core as
    ``PostgresScheduler`` - its drivers' (``flowsched.node``)."""
    if "mongo" in adapter:
        logger, words = "flowsched.node", "still running"
    else:
        logger, words = "flowsched.shutdown", "left running"
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == logger and words in record.getMessage()
    ]


def names(message: str, item_id: str) -> bool:
    """Whether ``message`` names ``item_id`` (quoted, or as its key ``id#generation``)."""
    return f"'{item_id}'" in message or f"{item_id}#" in message


@pytest.mark.parametrize("adapter", list(SYNC))
def test_close_returns_after_shutdown_timeout_naming_the_hung_item(
    adapter: str, caplog: pytest.LogCaptureFixture
) -> None:
    started, release = threading.Event(), threading.Event()

    def hung(item: Any, attempt: int) -> None:
        started.set()
        release.wait(60)

    scheduler = SYNC[adapter]()
    scheduler.start()
    scheduler.register("hung", hung)
    scheduler.create_single_timer("stuck-1", timedelta(0), "hung")
    try:
        assert started.wait(30), "the handler never started"
        with caplog.at_level(logging.WARNING, logger="flowsched"):
            scheduler.close()
        assert not release.is_set()  # returned while the handler still runs
        [message] = left_running(caplog, adapter)
        assert names(message, "stuck-1")
        assert "shutdown_timeout (0:00:00.200000)" in message or "after 0.2s" in message
    finally:
        release.set()


@pytest.mark.parametrize("adapter", list(ASYNC))
@pytest.mark.parametrize("face", ["async def ignoring its cancellation", "thread"])
def test_aclose_returns_after_shutdown_timeout_naming_the_hung_item(
    adapter: str, face: str, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    async def stubborn(item: Any, attempt: int) -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue  # hung for good: it will not stop

    def blocking(item: Any, attempt: int) -> None:
        release.wait(60)

    async def scenario() -> None:
        scheduler = ASYNC[adapter]()
        await scheduler.start()
        started = asyncio.Event()

        async def hung(item: Any, attempt: int) -> None:
            started.set()
            await stubborn(item, attempt)

        def hung_thread(item: Any, attempt: int) -> None:
            loop.call_soon_threadsafe(started.set)
            blocking(item, attempt)

        loop = asyncio.get_running_loop()
        scheduler.register("hung", hung if face.startswith("async") else hung_thread)
        await scheduler.create_single_timer("stuck-1", timedelta(0), "hung")
        await asyncio.wait_for(started.wait(), 30)
        with caplog.at_level(logging.WARNING, logger="flowsched"):
            await scheduler.aclose()  # no timeout given: shutdown_timeout bounds it
        assert not release.is_set()
        release.set()  # before asyncio.run's end, which waits for its executor's threads

    try:
        asyncio.run(asyncio.wait_for(scenario(), 50))
    finally:
        release.set()
    [message] = left_running(caplog, adapter)
    assert names(message, "stuck-1")


def test_a_close_with_no_handler_in_flight_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    scheduler = InMemoryScheduler(shutdown_timeout=SHORT)
    scheduler.start()
    with caplog.at_level(logging.WARNING, logger="flowsched.shutdown"):
        scheduler.close()
    assert left_running(caplog) == []


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(seconds=-1), timedelta(days=400)])
def test_a_shutdown_timeout_out_of_range_is_refused_naming_it(bad: timedelta) -> None:
    with pytest.raises(ValueError, match="shutdown_timeout"):
        InMemoryScheduler(shutdown_timeout=bad)


def test_the_config_key_is_read_and_checked() -> None:
    from flowsched import ConfigError

    with pytest.raises(ConfigError, match="shutdown-timeout"):
        SchedulingConfig.from_string("ipf-scheduler.flowsched.shutdown-timeout = 0s")
    settings = SchedulingConfig.from_string(
        "ipf-scheduler.flowsched.shutdown-timeout = 5s"
    ).scheduler_settings()
    assert settings.shutdown_timeout == timedelta(seconds=5)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "make",
    [
        lambda: InMemoryScheduler(shutdown_timeout=timedelta(minutes=5)),
        lambda: MongoScheduler(
            _collection(),
            poll_interval=FAST,
            push_wakeup=False,
            shutdown_timeout=timedelta(minutes=5),
        ),
    ],
    ids=["memory", "mongo"],
)
def test_a_handler_that_closes_its_scheduler_is_not_waited_for(make: Callable[[], Any]) -> None:
    """The bounded close runs in a thread of its own; from a handler it runs inline, as
    before, so that it does not wait (the whole shutdown_timeout) for its own caller."""
    closed = threading.Event()
    scheduler = make()

    def closing(item: Any, attempt: int) -> None:
        scheduler.close()
        closed.set()

    scheduler.start()
    scheduler.register("closing", closing)
    scheduler.create_single_timer("c-1", timedelta(0), "closing")
    assert closed.wait(20), "close() from a handler waited for its own caller"
    scheduler.close()
