"""A server restart mid-run (``pg_ctl stop -m fast``, 3.5 s down, start again), on a throwaway
server of this test's own (``tools/start-postgres.sh`` with a fresh ``PG_HOME``; the shared
test server is never touched): no timer is lost, and firing resumes within a poll of the
server's return - the outage backoff (0.1 s doubling) is capped at ``poll_interval``, so 3.5 s
down does not leave the node waiting up to 3.2 s more for its next try."""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from flowsched import AsyncPostgresScheduler, PostgresScheduler, ScheduleItem, ScheduleKind

ROOT = Path(__file__).resolve().parents[2]
START = ROOT / "tools" / "start-postgres.sh"
POLL = timedelta(milliseconds=500)
TIMERS = 150
DOWN_S = 3.5


class Server:
    """A throwaway PostgreSQL server in ``home`` (stopped and removed at the end)."""

    def __init__(self, home: str) -> None:
        # Its own port (picked free, then remembered in ``home``): not a PG_PORT given to
        # ``make test`` for the suite's server.
        self.env = {**os.environ, "PG_HOME": home}
        self.env.pop("PG_PORT", None)
        self.url = self._script("start")

    def _script(self, command: str) -> str:
        out = subprocess.run(
            ["bash", str(START), command], env=self.env, capture_output=True, text=True
        )
        assert out.returncode == 0, f"start-postgres.sh {command}: {out.stderr[-2000:]}"
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""

    def stop(self) -> None:
        self._script("stop")

    def start(self) -> float:
        """Start the server again: the monotonic time it first accepts a connection (probed
        every 5 ms while the start script runs)."""
        failed: list[BaseException] = []

        def start() -> None:
            try:
                self._script("start")
            except BaseException as error:  # an AssertionError naming the script's stderr
                failed.append(error)

        started = threading.Thread(target=start)
        started.start()
        give_up = time.monotonic() + 60
        up = None
        while up is None:
            try:
                psycopg.connect(self.url, connect_timeout=1).close()
                up = time.monotonic()
            except psycopg.OperationalError:
                if failed:
                    raise failed[0] from None
                assert time.monotonic() < give_up, f"no server on {self.url} after 60 s"
                time.sleep(0.005)
        started.join(60)
        return up


@pytest.fixture
def server() -> Iterator[Server]:
    if not glob.glob("/usr/lib/postgresql/*/bin/pg_ctl") or not os.environ.get(
        "FLOWSCHED_POSTGRES_URL"
    ):
        pytest.skip("needs the PostgreSQL binaries and the PostgreSQL test run")
    home = tempfile.mkdtemp(prefix="flowsched-restart-", dir="/tmp")  # short socket path
    server = Server(home)
    try:
        yield server
    finally:
        server._script("stop")
        shutil.rmtree(home, ignore_errors=True)


class Fired:
    """Handler starts, by item id, with their monotonic times."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, float]] = []
        self.cond = threading.Condition()

    def record(self, item: ScheduleItem) -> None:
        with self.cond:
            self.starts.append((item.id, time.monotonic()))
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.starts) >= count, timeout)

    def distinct(self) -> int:
        with self.cond:
            return len({item for item, _ in self.starts})


def _items(now: datetime) -> list[ScheduleItem]:
    """One timer every 20 ms from 300 ms on: 3 s of them, the restart in the middle."""
    step = timedelta(milliseconds=20)
    return [
        ScheduleItem(f"r-{n:04}", ScheduleKind.TIMER, now + timedelta(milliseconds=300) + n * step)
        for n in range(TIMERS)
    ]


def _restart(server: Server, fired: Fired) -> float:
    """Wait for a tenth of the timers, stop the server, keep it down ``DOWN_S``, start it:
    the monotonic time it answers again."""
    assert fired.wait_for(TIMERS // 10, 30), "nothing fired before the restart"
    server.stop()
    time.sleep(DOWN_S)
    return server.start()


def _check(fired: Fired, up: float) -> None:
    with fired.cond:
        starts = list(fired.starts)
    counts = Counter(item for item, _ in starts)
    assert set(counts) == {f"r-{n:04}" for n in range(TIMERS)}, "a timer was lost"
    after = [at for _, at in starts if at >= up]
    assert after, "nothing fired after the server came back"
    resumed = min(after) - up
    print(f"\nfiring resumed {resumed:.3f} s after the server's return; {len(starts)} starts")
    # Within a poll of the server's return (plus a claim's round trips on a busy machine).
    assert resumed <= POLL.total_seconds() + 0.5, f"firing resumed {resumed:.3f} s after"


@pytest.mark.slow
def test_a_server_restart_loses_nothing_and_firing_resumes_within_a_poll(
    server: Server,
) -> None:
    fired = Fired()
    with PostgresScheduler(
        server.url, poll_interval=POLL, lease=timedelta(seconds=3), op_timeout=timedelta(seconds=5)
    ) as node:
        node.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.record(item))
        for item in _items(node.store.now()):
            node.schedule(item)
        up = _restart(server, fired)
        assert fired.wait_for(TIMERS, 60) or fired.distinct() == TIMERS, "timers left"
        fired.wait_for(10**9, 0.5)  # repeats, if any, have their chance to show
    _check(fired, up)


@pytest.mark.slow
def test_the_async_face_after_a_server_restart_loses_nothing_and_resumes_within_a_poll(
    server: Server,
) -> None:
    fired = Fired()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        fired.record(item)

    async def run() -> float:
        node = AsyncPostgresScheduler(
            server.url,
            poll_interval=POLL,
            lease=timedelta(seconds=3),
            op_timeout=timedelta(seconds=5),
        )
        node.subscribe(ScheduleKind.TIMER, handler)
        await node.start()
        try:
            now = await node.store.now()
            for item in _items(now):
                await node.schedule(item)
            up = await asyncio.to_thread(_restart, server, fired)
            await asyncio.to_thread(fired.wait_for, TIMERS, 60)
            await asyncio.sleep(0.5)
        finally:
            await node.aclose()
        return up

    up = asyncio.run(run())
    _check(fired, up)
