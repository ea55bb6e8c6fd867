"""LISTEN/NOTIFY: scheduling a row due soon wakes a listening node with its route; a row due
later does not (polling finds it)."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.store import PostgresTimerStore
from flowsched.postgres.wakeup import AsyncListener, Listener
from flowsched.records import ScheduleItem, ScheduleKind


def _item(store_now: datetime, item_id: str, due_in: timedelta) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, store_now + due_in, handler="wake")


def test_a_row_due_soon_wakes_the_listener_with_its_route(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    heard: queue.Queue[str | None] = queue.Queue()
    with PostgresTimerStore(postgres_url, table=fresh_table(), pool_size=1) as store:
        listener = Listener(postgres_url, store.setup.queries.channel, heard.put)
        listener.start()
        try:
            # LISTEN takes effect once the thread has connected: schedule until heard.
            for attempt in range(50):
                store.put(_item(store.now(), f"soon-{attempt}", timedelta(seconds=1)))
                try:
                    assert heard.get(timeout=0.2) == "h:wake"
                    break
                except queue.Empty:
                    continue
            else:
                raise AssertionError("no notification within 10 s")
            while not heard.empty():
                heard.get()
            store.put(_item(store.now(), "later", timedelta(hours=1)))
            store.put(_item(store.now(), "soon-last", timedelta(0)))
            assert heard.get(timeout=10) == "h:wake"
            assert heard.empty(), "a row due in an hour woke the listener"
        finally:
            listener.stop()


def test_the_async_listener_hears_the_same(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    async def main() -> None:
        heard: asyncio.Queue[str | None] = asyncio.Queue()
        async with AsyncPostgresTimerStore(postgres_url, table=fresh_table(), pool_size=1) as store:
            listener = AsyncListener(postgres_url, store.setup.queries.channel, heard.put_nowait)
            listener.start()
            try:
                for attempt in range(50):
                    await store.put(_item(await store.now(), f"s-{attempt}", timedelta(0)))
                    try:
                        assert await asyncio.wait_for(heard.get(), 0.2) == "h:wake"
                        return
                    except TimeoutError:
                        continue
                raise AssertionError("no notification within 10 s")
            finally:
                await listener.stop()

    asyncio.run(main())


def test_an_async_listener_stops_and_a_cancelled_stop_is_cancelled(postgres_url: str) -> None:
    async def main() -> None:
        listener = AsyncListener(postgres_url, "flowsched_stop_check", lambda route: None)
        listener.start()
        await asyncio.sleep(0.2)  # connected and listening, most likely
        stopping = asyncio.ensure_future(listener.stop())
        await asyncio.sleep(0)  # stop() waits for the listening task's end
        stopping.cancel()
        with pytest.raises(asyncio.CancelledError):  # not swallowed with the task's cancel
            await stopping
        await asyncio.wait_for(listener.stop(), 5)  # and stopping again ends it

    asyncio.run(main())
