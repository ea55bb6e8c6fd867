"""A node on a host whose clock is minutes off the server's counts due times from the server's
time (CONTRACT section 14): "in 2 s" is 2 s by the clock that judges due, neither at once (a
host behind) nor minutes late (a host ahead). The host's clock is simulated: the store's
``host_clock`` and the face's system clock both read ``SKEW`` off the real one (the server
runs on this host)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

import flowsched.node.common as node_common
from flowsched import RedeliveryPolicy, ScheduleItem
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.postgres import AsyncPostgresTimerStore, PostgresTimerStore

DELAY = timedelta(seconds=2)
SLACK = timedelta(seconds=1)  # a round trip and more: far below the skew


def server_now(url: str) -> datetime:
    """The server's time, read apart (the stores under test take no sample from it)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT statement_timestamp()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def host_clock(skew: timedelta) -> type:
    class SkewedClock:
        def now(self) -> datetime:
            return datetime.now(UTC) + skew

        def monotonic(self) -> float:
            return time.monotonic()

    return SkewedClock


@pytest.mark.parametrize("skew", [timedelta(minutes=-5), timedelta(minutes=5)], ids=str)
def test_a_delay_and_a_backoff_count_from_the_server_s_time(
    skew: timedelta,
    postgres_url: str,
    fresh_table: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = host_clock(skew)
    monkeypatch.setattr(node_common, "SystemClock", clock)
    store = PostgresTimerStore(postgres_url, table=fresh_table(), pool_size=2)
    store.host_clock = clock()
    policy = RedeliveryPolicy(initial=timedelta(seconds=30), maximum=timedelta(seconds=30))
    node = NodeScheduler(store, redelivery=policy, poll_interval=timedelta(milliseconds=200))
    failed = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        failed.set()
        raise RuntimeError("again later")

    try:
        node.register("h", handler)
        before = server_now(postgres_url)
        item = node.create_single_timer("x", DELAY, "h")  # its first measurement, too
        after = server_now(postgres_url)
        assert before + DELAY <= item.due <= after + DELAY + SLACK, (
            f"due {item.due} is not {DELAY} after the server's time {before}..{after}"
        )
        due_now = ScheduleItem("fail", item.kind, server_now(postgres_url), handler="h")
        node.schedule(due_now)
        node.start()
        deadline = time.monotonic() + 20
        while (stored := store.get("fail")) is not None and stored.due == due_now.due:
            assert time.monotonic() < deadline, "the failing timer never ran"
            time.sleep(0.05)
        assert stored is not None and failed.is_set()
        server = server_now(postgres_url)
        assert server + policy.initial - SLACK <= stored.due <= server + policy.initial + SLACK, (
            f"a 30 s backoff counted from the host's clock: due {stored.due}, server {server}"
        )
    finally:
        node.close()
        store.close()


def test_the_async_face_counts_a_delay_from_the_server_s_time(
    postgres_url: str, fresh_table: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = host_clock(timedelta(minutes=-5))
    monkeypatch.setattr(node_common, "SystemClock", clock)

    async def main() -> tuple[datetime, datetime, datetime]:
        store = AsyncPostgresTimerStore(postgres_url, table=fresh_table(), pool_size=2)
        store.host_clock = clock()
        node = AsyncNodeScheduler(store)
        try:
            node.register("h", lambda item, attempt: None)
            before = server_now(postgres_url)
            item = await node.create_single_timer("x", DELAY, "h")  # its first measurement
            return before, item.due, server_now(postgres_url)
        finally:
            await node.aclose()
            await store.aclose()

    before, due, after = asyncio.run(main())
    assert before + DELAY <= due <= after + DELAY + SLACK, (before, due, after)
