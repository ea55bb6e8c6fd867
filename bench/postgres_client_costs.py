"""Where a timer's time goes on the client, between its row and its handler: the PostgreSQL
scheduler's firing path with no server, on both faces.

    python bench/postgres_client_costs.py [--timers 20000] [--profile sync|async]

The node (``NodeScheduler`` / ``AsyncNodeScheduler`` over the PostgreSQL stores, as
``bench/postgres_bench.py`` runs them: ``workers=64, batch_size=100``, a handler that records
the time) runs its real code - the node core, the driver, the delivery, the statements'
parameters (dumped by psycopg as for the server) and the decoding of the rows - over a
connection that answers every statement at once from memory, with the rows the server would
send (each claim's rows due, every settle applied). So its rate is the client's ceiling:
what one node could fire if the server cost nothing. ``--profile`` prints the cProfile of
one face, by cumulative time per fired timer for the steps of the path.

Prints, per face, timers fired per second and CPU microseconds per fired timer (medians of
3 runs); the ratio to the server-bound rates of ``postgres_bench.py`` says how much of a
timer's time is the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from flowsched import ScheduleItem, ScheduleKind
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.postgres import plans
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.operations import Setup
from flowsched.postgres.store import PostgresTimerStore

LEASE = timedelta(seconds=30)


class _Cursor:
    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self.rows = rows
        self.description = () if rows is not None else None

    def fetchall(self) -> list[tuple[object, ...]]:
        return self.rows


class Answers:
    """A connection that answers the firing path's statements from memory: ``timers`` rows
    due, claimed in order, every settle applied. Parameters are dumped as psycopg would."""

    def __init__(self, setup: Setup, timers: int) -> None:
        self.names = {setup.queries[name]: name for name in _NAMES}
        due = datetime.now(UTC) - timedelta(seconds=2)
        self.rows = deque(
            (f"t-{n}", n + 1, "TIMER", None, None, due, None, None, None, 0) for n in range(timers)
        )
        self.lock = threading.Lock()

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Cursor:
        PostgresQuery(Transformer()).convert(sql, params)  # what psycopg does before sending
        name = self.names.get(sql)
        now = datetime.now(UTC)
        if name in ("claim_started", "claim_due"):
            assert params is not None
            with self.lock:
                take = [self.rows.popleft() for _ in range(min(params["limit"], len(self.rows)))]
            lease = now + LEASE
            token = uuid.uuid4().hex
            return _Cursor([(*row, 0, lease, "k:TIMER", token) for row in take])
        if name in ("settle_completed", "settle"):
            assert params is not None
            return _Cursor(
                [
                    (i, now, now + LEASE, t)
                    for i, t in zip(params["ids"], params["tokens"], strict=True)
                ]
            )
        if name == "next_due":
            return _Cursor([(None,)])
        return _Cursor([])

    async def aexecute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Cursor:
        return self.execute(sql, params)


_NAMES = ("claim_started", "claim_due", "settle_completed", "settle", "next_due", "renew")


def _sync_store(timers: int) -> PostgresTimerStore:
    store = PostgresTimerStore.__new__(PostgresTimerStore)
    store.setup = Setup.checked("bench_client", None, timedelta(seconds=5), 20, LEASE, False)
    answers = Answers(store.setup, timers)

    def run(plan: plans.Plan[Any], what: str, write: bool, *, atomic: bool = False) -> Any:
        return plans.run(answers, plan, what=what, write=write)  # type: ignore[arg-type]

    store._run = run  # type: ignore[method-assign]
    return store


def _async_store(timers: int) -> AsyncPostgresTimerStore:
    store = AsyncPostgresTimerStore.__new__(AsyncPostgresTimerStore)
    store.setup = Setup.checked("bench_client", None, timedelta(seconds=5), 20, LEASE, False)
    answers = Answers(store.setup, timers)

    class Conn:
        async def execute(self, sql: str, params: Any = None) -> Any:
            cursor = answers.execute(sql, params)

            class Async:
                description = cursor.description

                async def fetchall(self) -> Any:
                    return cursor.rows

            return Async()

    async def run(plan: plans.Plan[Any], what: str, write: bool, *, atomic: bool = False) -> Any:
        return await plans.run_async(Conn(), plan, what=what, write=write)  # type: ignore[arg-type]

    store._run = run  # type: ignore[method-assign]
    return store


def run_sync(timers: int) -> tuple[float, float]:
    fired = [0]
    done = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        fired[0] += 1
        if fired[0] >= timers:
            done.set()

    scheduler = NodeScheduler(_sync_store(timers), workers=64, batch_size=100)
    scheduler.subscribe(ScheduleKind.TIMER, handler)
    began, cpu = time.perf_counter(), time.process_time()
    scheduler.start()
    done.wait(120)
    elapsed, used = time.perf_counter() - began, time.process_time() - cpu
    scheduler.close()
    return timers / elapsed, 1e6 * used / timers


def run_async(timers: int) -> tuple[float, float]:
    async def main() -> tuple[float, float]:
        fired = [0]
        done = asyncio.Event()

        async def handler(item: ScheduleItem, attempt: int) -> None:
            fired[0] += 1
            if fired[0] >= timers:
                done.set()

        store = _async_store(timers)
        scheduler = AsyncNodeScheduler(store, workers=64, batch_size=100)
        scheduler.subscribe(ScheduleKind.TIMER, handler)
        began, cpu = time.perf_counter(), time.process_time()
        await scheduler.start()
        await asyncio.wait_for(done.wait(), 120)
        elapsed, used = time.perf_counter() - began, time.process_time() - cpu
        await scheduler.aclose()
        return timers / elapsed, 1e6 * used / timers

    return asyncio.run(main())


FACES = {"sync": run_sync, "async": run_async}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument("--profile", choices=list(FACES))
    args = parser.parse_args()
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(FACES[args.profile], args.timers)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        return
    for face, run in FACES.items():
        results = [run(args.timers) for _ in range(3)]
        rate = statistics.median(r[0] for r in results)
        cpu = statistics.median(r[1] for r in results)
        print(f"{face:6s} client only: {rate:8.0f} timers/s, {cpu:6.1f} us CPU per timer")


if __name__ == "__main__":
    main()
