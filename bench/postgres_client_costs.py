"""Where a timer's time goes on the client, between its row and its handler: the PostgreSQL
scheduler's firing path with no server, on both faces.

    python bench/postgres_client_costs.py [--timers 20000] [--faces sync,async]
        [--profile sync|async [--top 40]] [--threads]

The node (``NodeScheduler`` / ``AsyncNodeScheduler`` over the PostgreSQL stores, as
``bench/postgres_bench.py`` runs them: ``workers=64, batch_size=100``, a handler that records
the time) runs its real code - the node core, the driver, the delivery, the statements'
parameters (dumped by psycopg as for the server) and the decoding of the rows - over a
connection that answers every statement at once from memory, with the rows the server would
send (each claim's rows due, every settle applied), as the pool of the real store (its calls,
plans and ``op_timeout`` watch as ``PostgresScheduler`` makes them). So its rate is the
client's ceiling: what one node could fire if the server cost nothing (psycopg's own work on
the wire and the decoding of rows aside). ``--profile sync|async`` profiles one run in every
thread (the node's loop, its store-call and handler threads, the event loop) and prints the
functions by own and by cumulative time, in microseconds per fired timer (wall time on a
running thread, so a function that waits for another thread shows that wait; the profiler's
own cost inflates every figure, the shares are what to read). ``--threads`` runs each face
once and prints its CPU per timer by thread: the loop, the store calls, the handlers (the
asyncio face runs them all on the calling thread).

Prints, per face, timers fired per second and CPU microseconds per fired timer (medians of
3 runs); the ratio to the server-bound rates of ``postgres_bench.py`` says how much of a
timer's time is the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import itertools
import os
import pstats
import statistics
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from flowsched import ScheduleItem, ScheduleKind
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.scheduler import NodeScheduler
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.operations import Setup
from flowsched.postgres.store import PostgresTimerStore

LEASE = timedelta(seconds=30)


class _Result:
    """The ``pgresult`` of a statement that returned rows (every one answered here)."""

    nfields = 1
    status = 2  # TUPLES_OK


class _Cursor:
    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self.rows = rows
        self.description = ()  # what the node read before (the columns: none built here)
        self.pgresult = _Result()

    def fetchall(self) -> list[tuple[object, ...]]:
        return self.rows


class _AsyncCursor:
    def __init__(self, cursor: _Cursor) -> None:
        self.rows = cursor.rows
        self.description = cursor.description
        self.pgresult = cursor.pgresult

    async def fetchall(self) -> list[tuple[object, ...]]:
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
        self.tokens = itertools.count()  # the server's gen_random_uuid(), at no client cost
        self._null = open(os.devnull, "rb")  # noqa: SIM115 - a descriptor for fileno()

    def fileno(self) -> int:
        """What ``op_timeout``'s watchdog would shut down (never reached here)."""
        return self._null.fileno()

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Cursor:
        PostgresQuery(Transformer()).convert(sql, params)  # what psycopg does before sending
        name = self.names.get(sql)
        now = datetime.now(UTC)
        if name in ("claim_started", "claim_due"):
            assert params is not None
            with self.lock:
                take = [self.rows.popleft() for _ in range(min(params["limit"], len(self.rows)))]
            lease, tokens = now + LEASE, self.tokens
            return _Cursor([(*row, 0, lease, "k:TIMER", f"{next(tokens):032x}") for row in take])
        if name in ("settle_completed", "settle"):
            assert params is not None
            return _Cursor(
                [
                    (i, now, now + LEASE, t)
                    for i, t in zip(params["ids"], params["tokens"], strict=True)
                ]
            )
        if name == "next_due":
            return _Cursor([(None, now)])  # nothing else due; the store's time of the answer
        return _Cursor([])

    def cursor(self) -> _Statements:
        """A cursor on this connection (the plans keep one per connection)."""
        return _Statements(self)

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Answers]:
        """The pool's ``connection()``: this connection, at once."""
        yield self

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield


class _Statements:
    """A cursor of :class:`Answers`: each statement's rows, as psycopg's cursor keeps them."""

    closed = False

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.last = _Cursor([])
        self.pgresult = self.last.pgresult

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Statements:
        self.last = self.answers.execute(sql, params)
        return self

    def fetchall(self) -> list[tuple[object, ...]]:
        return self.last.rows


class _AsyncStatements(_Statements):
    async def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Statements:  # type: ignore[override]
        self.last = self.answers.execute(sql, params)
        return self

    async def fetchall(self) -> list[tuple[object, ...]]:  # type: ignore[override]
        return self.last.rows


class AsyncAnswers:
    """:class:`Answers` as an asyncio pool and connection."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers

    def fileno(self) -> int:
        return self.answers.fileno()

    async def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _AsyncCursor:
        return _AsyncCursor(self.answers.execute(sql, params))

    def cursor(self) -> _AsyncStatements:
        return _AsyncStatements(self.answers)

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[AsyncAnswers]:
        yield self

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        yield


_NAMES = ("claim_started", "claim_due", "settle_completed", "settle", "next_due", "renew")

# The store as PostgresScheduler makes it (its default op_timeout: each call is watched).
_STORE = {"table": "bench_client", "migrate": False, "op_timeout": timedelta(seconds=10)}


class _SyncStore(PostgresTimerStore):
    """The real store - its calls, plans, time limits - over :class:`Answers` as its pool."""

    def _attach(self, timers: Any, pool_size: int, migrate: bool) -> None:
        self.pool = Answers(self.setup, timers)  # type: ignore[assignment]
        self._owned = False


class _AsyncStore(AsyncPostgresTimerStore):
    """The real asyncio store over :class:`AsyncAnswers` as its pool, opened."""

    def _attach(self, timers: Any, pool_size: int, migrate: bool) -> None:
        super()._attach("postgresql://bench@localhost/none", pool_size, False)
        self._pool = AsyncAnswers(Answers(self.setup, timers))  # type: ignore[assignment]
        self._owned = False
        self._ready = True


def _sync_store(timers: int) -> PostgresTimerStore:
    return _SyncStore(timers, **_STORE)  # type: ignore[arg-type]


def _async_store(timers: int) -> AsyncPostgresTimerStore:
    return _AsyncStore(timers, **_STORE)  # type: ignore[arg-type]


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


class ThreadProfiles:
    """A cProfile per thread, for the threads started while it is on (the node's loop, its
    store-call and handler threads), and the calling thread's own: the firing path runs on
    all of them. Each counts its thread's CPU time (``time.thread_time``), so a thread that
    waits costs nothing; each ends with its thread (or at :meth:`stats`)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._run = threading.Thread.run

    def __enter__(self) -> ThreadProfiles:
        profiles, run = self.profiles, self._run

        def profiled(thread: threading.Thread) -> None:
            profile = cProfile.Profile()
            profiles.append(profile)
            profile.enable()
            try:
                run(thread)
            finally:
                profile.disable()

        threading.Thread.run = profiled  # type: ignore[method-assign,assignment]
        self.main = cProfile.Profile()
        profiles.append(self.main)
        self.main.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.main.disable()
        threading.Thread.run = self._run  # type: ignore[method-assign]

    def stats(self) -> pstats.Stats:
        time.sleep(IDLE_WAIT)  # handler threads that were told to stop end their profiles
        return pstats.Stats(*self.profiles)


IDLE_WAIT = 1.5  # seconds: longer than an idle handler thread's check (drivers.workers)


def print_profile(stats: pstats.Stats, timers: int, top: int) -> None:
    """The functions that cost most, in microseconds per fired timer: by own time (where the
    CPU goes) and by cumulative time (which step it is spent in), every thread merged."""
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in rows.values())
    print(f"profiled: {1e6 * total / timers:.1f} us per timer (all threads, profiler included)")

    def name(key: tuple[str, int, str]) -> str:
        path, line, func = key
        if path == "~":
            return func
        return f"{'/'.join(path.rsplit('/', 2)[-2:])}:{line}({func})"

    for title, index in (("own time", 2), ("cumulative", 3)):
        print(f"\n-- by {title}: us per timer, calls per timer --")
        ordered = sorted(rows.items(), key=lambda kv: kv[1][index], reverse=True)[:top]
        for key, (_cc, nc, tt, ct, _callers) in ordered:
            print(
                f"{1e6 * tt / timers:8.2f} own {1e6 * ct / timers:8.2f} cum "
                f"{nc / timers:7.3f}  {name(key)}"
            )


class ThreadCPU:
    """The CPU time of each thread started while it is on, summed by role: the node's loop,
    its store-call threads, its handler threads, and the calling thread (the asyncio face's
    event loop). Read each thread's own CPU clock as it ends (no profiler)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._run = threading.Thread.run

    def __enter__(self) -> ThreadCPU:
        seconds, run = self.seconds, self._run

        def counted(thread: threading.Thread) -> None:
            try:
                run(thread)
            finally:
                role = _role(thread.name)
                seconds[role] = seconds.get(role, 0.0) + time.thread_time()

        threading.Thread.run = counted  # type: ignore[method-assign,assignment]
        self._began = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds["calling thread"] = time.thread_time() - self._began
        threading.Thread.run = self._run  # type: ignore[method-assign]


def _role(name: str) -> str:
    if not name.startswith("flowsched-node-"):
        return "other threads"
    return next((r for r in ("handler", "store") if f"-{r}" in name), "loop") + " threads"


def print_threads(timers: int) -> None:
    """Each face once: its CPU per timer in each role of thread."""
    for face, run in FACES.items():
        with ThreadCPU() as cpu:
            run(timers)
            time.sleep(IDLE_WAIT)  # the handler threads told to stop end (and are counted)
        shares = ", ".join(
            f"{role} {1e6 * seconds / timers:.1f}"
            for role, seconds in sorted(cpu.seconds.items(), key=lambda kv: -kv[1])
        )
        print(f"{face:6s} us CPU per timer by thread: {shares}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument("--profile", choices=list(FACES))
    parser.add_argument("--top", type=int, default=40, help="profile lines per table")
    parser.add_argument("--faces", default=",".join(FACES), help="faces to time, by comma")
    parser.add_argument("--threads", action="store_true", help="CPU per timer by thread")
    args = parser.parse_args()
    if args.threads:
        print_threads(args.timers)
        return
    if args.profile:
        with ThreadProfiles() as profiles:
            FACES[args.profile](args.timers)
        print_profile(profiles.stats(), args.timers, args.top)
        return
    for face in args.faces.split(","):
        run: Callable[[int], tuple[float, float]] = FACES[face]
        results = [run(args.timers) for _ in range(3)]
        rate = statistics.median(r[0] for r in results)
        cpu = statistics.median(r[1] for r in results)
        print(f"{face:6s} client only: {rate:8.0f} timers/s, {cpu:6.1f} us CPU per timer")


if __name__ == "__main__":
    main()
