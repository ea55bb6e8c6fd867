"""PostgresScheduler against the floor of a safe at-least-once design, on one PostgreSQL.

    bash tools/with-postgres.sh .venv/bin/python bench/postgres_bench.py [--timers 20000]
        [--backlog]     # every timer already due when the node starts: the drain rate

The floor is raw psycopg 3 with no scheduler around it: a claim of 100 due rows
(``UPDATE ... WHERE id IN (SELECT ... ORDER BY due LIMIT 100 FOR UPDATE SKIP LOCKED)``,
setting owner, lease and generation + 1), then one fenced ``DELETE ... WHERE id = ANY(ids)
AND generation = ANY(...)`` per batch; when nothing is due it sleeps until the next due row
(at most 50 ms). Its "handler" records the time and does nothing else.

Each contender fires ``--timers`` timers (default 20,000) due within 1 s, on one node, in a
fresh process and a fresh table, rows written beforehand by one ``INSERT ... SELECT`` (so
the figures are firing only; ``schedule()`` is measured apart), the sync face and the
asyncio face (``AsyncPostgresScheduler``, an ``async def`` handler): fired per second (from the
first due time to the last handler start), p50/p99 lateness (handler start minus due) and
statements per fired timer (``pg_stat_statements`` is not assumed: the contenders count
their own statements). Medians of 3 rounds, the
contenders taking turns. PostgresScheduler runs with ``workers=100, batch_size=100``: a node
claims for its free handler slots only (it starts what it claims at once), so 100 slots make
its claims the floor's 100 rows (with 64, the claims of 64 rows cycle at about the rate the
timers fall due, and any pause leaves lateness behind: session 7 measured p99 3.5x the
floor's with 64, 1.2-1.5x with 100; ``--workers N`` for N slots). Then
``schedule()``'s cost (2,000 calls) and the cross-node wake-up (30 timers due 300 ms after
another node schedules them, fired by a node that polls every 5 s: p50/p99 lateness).
Prints the server's ``fsync`` and ``synchronous_commit``, a table, and writes
``bench/results/postgres.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

ROUNDS = 3
WINDOW_S = 1.0
LEAD_S = 1.5  # rows are due from this long after they are written
BACKLOG = os.environ.get("FLOWSCHED_BENCH_BACKLOG") == "1"
"""``--backlog``: every row already due (over the second before it is written); the rate is
counted from when firing may begin, lateness is not reported."""
WORKERS = int(os.environ.get("FLOWSCHED_BENCH_WORKERS", "100"))
"""``--workers``: the handler slots of the flowsched node (default 100, the floor's batch). A
node that starts its claims as it claims them claims for free slots only, so its batches are
at most this."""


def _due_from() -> float:
    return time.time() - 2.0 if BACKLOG else time.time() + LEAD_S


def _url() -> str:
    url = os.environ.get("FLOWSCHED_POSTGRES_URL")
    if not url:
        sys.exit("FLOWSCHED_POSTGRES_URL is not set (run under tools/with-postgres.sh)")
    return url


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the floor ---------------------------------------------------------------------------

FLOOR_TABLE = """CREATE TABLE {t} (id text PRIMARY KEY, route text NOT NULL,
    due timestamptz NOT NULL, generation bigint NOT NULL DEFAULT 1, owner text,
    lease_until timestamptz);
CREATE INDEX {t}_claim ON {t} (route, due)"""
FLOOR_CLAIM = """UPDATE {t} SET owner = %s, lease_until = now() + interval '30 s',
    generation = generation + 1
WHERE id IN (SELECT id FROM {t} WHERE route = ANY(%s) AND due <= now()
             AND (lease_until IS NULL OR lease_until < now())
             ORDER BY due LIMIT 100 FOR UPDATE SKIP LOCKED)
RETURNING id, generation, due"""
FLOOR_SETTLE = """DELETE FROM {t} WHERE id = ANY(%s) AND generation = ANY(%s)"""
FLOOR_NEXT = """SELECT min(due) FROM {t} WHERE route = ANY(%s)"""


def run_floor(url: str, timers: int) -> dict[str, float]:
    table = f"bench_floor_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FLOOR_TABLE.format(t=table).encode())
        start = _insert_floor(conn, table, timers)
        late: list[float] = []
        statements = 0
        routes = ["k:TIMER"]
        claim, settle = FLOOR_CLAIM.format(t=table).encode(), FLOOR_SETTLE.format(t=table).encode()
        nxt = FLOOR_NEXT.format(t=table).encode()
        last = start
        while len(late) < timers:
            rows = conn.execute(claim, ("floor", routes)).fetchall()
            statements += 1
            if rows:
                now = time.time()
                late.extend(now - due.timestamp() for _, _, due in rows)
                last = now
                ids = [row[0] for row in rows]
                conn.execute(settle, (ids, [row[1] for row in rows]))
                statements += 1
            if len(rows) < 100:
                soonest = conn.execute(nxt, (routes,)).fetchone()
                statements += 1
                if soonest and soonest[0] is not None:
                    wait = soonest[0].timestamp() - time.time()
                    if wait > 0:
                        time.sleep(min(wait, 0.05))
        conn.execute(f"DROP TABLE {table}".encode())
    return _figures(late, start, last, statements, timers)


def _insert_floor(conn: psycopg.Connection[Any], table: str, timers: int) -> float:
    start = _due_from()
    conn.execute(
        f"""INSERT INTO {table} (id, route, due)
        SELECT 't-' || n, 'k:TIMER', to_timestamp(%s + n * %s / %s)
        FROM generate_series(0, %s - 1) AS n""".encode(),
        (start, WINDOW_S, timers, timers),
    )
    if BACKLOG:
        return time.time()
    time.sleep(max(0.0, start - time.time()))
    return start


def _figures(
    late: list[float], start: float, last: float, statements: int, timers: int
) -> dict[str, float]:
    return {
        "fired": len(late),
        "fired_per_s": len(late) / max(last - start, 1e-9),
        "p50_ms": 1000 * _percentile(late, 0.5),
        "p99_ms": 1000 * _percentile(late, 0.99),
        "statements_per_timer": statements / max(len(late), 1),
    }


# -- PostgresScheduler --------------------------------------------------------------------


def run_flowsched(url: str, timers: int) -> dict[str, float]:
    from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind
    from flowsched.postgres import plans

    calls = 0
    counting = threading.Lock()
    sync_steps = plans._sync_steps

    def counted(conn: psycopg.Connection[Any], plan: plans.Plan[Any]) -> Any:
        # Each statement a plan yields is one round trip: count them.
        nonlocal calls

        def statements() -> plans.Plan[Any]:
            nonlocal calls
            rows = None
            step = next(plan)
            while True:
                with counting:
                    calls += 1
                rows = yield step
                try:
                    step = plan.send(rows)
                except StopIteration as stop:
                    return stop.value

        return sync_steps(conn, statements())

    plans._sync_steps = counted

    table = f"bench_fs_{uuid.uuid4().hex[:8]}"
    late: list[float] = []
    done = threading.Event()
    last = 0.0

    def handler(item: ScheduleItem, attempt: int) -> None:
        nonlocal last
        now = time.time()
        with counting:
            late.append(now - item.due.timestamp())
            last = now
            if len(late) >= timers:
                done.set()

    scheduler = PostgresScheduler(
        url, table=table, workers=WORKERS, batch_size=100, poll_interval=timedelta(seconds=1)
    )
    scheduler.subscribe(ScheduleKind.TIMER, handler)
    start = _insert_timers(url, table, timers)
    calls = 0
    scheduler.start()
    try:
        if not done.wait(120):
            print(f"flowsched: only {len(late)} of {timers} fired in 120 s", file=sys.stderr)
    finally:
        scheduler.close()
    with psycopg.connect(url, autocommit=True) as conn:
        from flowsched.postgres.schema import drop_tables

        drop_tables(conn, table)
    return _figures(late, start, last, calls, timers)


def _insert_timers(url: str, table: str, timers: int) -> float:
    start = _due_from()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"""INSERT INTO {table} (id, generation, kind, route, due, scheduled_at)
            SELECT 't-' || n, nextval('{table}_generation'), 'TIMER', 'k:TIMER',
                   to_timestamp(%s + n * %s / %s), now()
            FROM generate_series(0, %s - 1) AS n""".encode(),
            (start, WINDOW_S, timers, timers),
        )
    return time.time() if BACKLOG else start


def run_flowsched_async(url: str, timers: int) -> dict[str, float]:
    """AsyncPostgresScheduler with an ``async def`` handler, measured as the sync face."""
    import asyncio

    from flowsched import AsyncPostgresScheduler, ScheduleItem, ScheduleKind
    from flowsched.postgres import plans
    from flowsched.postgres.schema import drop_tables

    calls = 0
    async_steps = plans._async_steps

    async def counted(conn: psycopg.AsyncConnection[Any], plan: plans.Plan[Any]) -> Any:
        def statements() -> plans.Plan[Any]:
            nonlocal calls
            step = next(plan)
            while True:
                calls += 1
                rows = yield step
                try:
                    step = plan.send(rows)
                except StopIteration as stop:
                    return stop.value

        return await async_steps(conn, statements())

    plans._async_steps = counted
    table = f"bench_fa_{uuid.uuid4().hex[:8]}"
    late: list[float] = []
    last = 0.0

    async def main() -> float:
        nonlocal last
        done = asyncio.Event()

        async def handler(item: ScheduleItem, attempt: int) -> None:
            nonlocal last
            now = time.time()
            late.append(now - item.due.timestamp())
            last = now
            if len(late) >= timers:
                done.set()

        scheduler = AsyncPostgresScheduler(
            url, table=table, workers=WORKERS, batch_size=100, poll_interval=timedelta(seconds=1)
        )
        scheduler.subscribe(ScheduleKind.TIMER, handler)
        await scheduler._pg_store.open()
        start = await asyncio.to_thread(_insert_timers, url, table, timers)
        nonlocal calls
        calls = 0
        await scheduler.start()
        try:
            await asyncio.wait_for(done.wait(), 120)
        finally:
            await scheduler.aclose()
        return start

    start = asyncio.run(main())
    with psycopg.connect(url, autocommit=True) as conn:
        drop_tables(conn, table)
    return _figures(late, start, last, calls, timers)


def run_wakeup(url: str, count: int = 30) -> dict[str, float]:
    """Cross-node wake-up: ``count`` timers, each scheduled by one node due 300 ms later,
    fired by another that polls every 5 s (only LISTEN/NOTIFY can make it fire on time):
    p50/p99 lateness."""
    from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind
    from flowsched.postgres.schema import drop_tables

    table = f"bench_wake_{uuid.uuid4().hex[:8]}"
    late: list[float] = []
    fired = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        late.append(time.time() - item.due.timestamp())
        fired.set()

    firing = PostgresScheduler(url, table=table, poll_interval=timedelta(seconds=5))
    other = PostgresScheduler(url, table=table, listen=False)
    firing.subscribe(ScheduleKind.TIMER, handler)
    firing.start()
    time.sleep(1.0)  # the listener connects
    try:
        for n in range(count):
            fired.clear()
            due = datetime.now(UTC) + timedelta(milliseconds=300)
            other.schedule(ScheduleItem(f"w-{n}", ScheduleKind.TIMER, due))
            fired.wait(10)
            time.sleep(0.05)
    finally:
        firing.close()
        other.close()
    with psycopg.connect(url, autocommit=True) as conn:
        drop_tables(conn, table)
    return {
        "wake_p50_ms": 1000 * _percentile(late, 0.5),
        "wake_p99_ms": 1000 * _percentile(late, 0.99),
        "wake_fired": len(late),
    }


def run_schedule_cost(url: str, count: int = 2000) -> dict[str, float]:
    from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind

    table = f"bench_put_{uuid.uuid4().hex[:8]}"
    with PostgresScheduler(url, table=table, listen=False) as scheduler:
        due = datetime.now(UTC) + timedelta(hours=1)
        began = time.perf_counter()
        for n in range(count):
            scheduler.schedule(ScheduleItem(f"p-{n}", ScheduleKind.TIMER, due))
        seconds = time.perf_counter() - began
    with psycopg.connect(url, autocommit=True) as conn:
        from flowsched.postgres.schema import drop_tables

        drop_tables(conn, table)
    return {"schedule_us": 1e6 * seconds / count}


# -- rounds in fresh processes ------------------------------------------------------------

CONTENDERS = {
    "floor": run_floor,
    "flowsched": run_flowsched,
    "flowsched-async": run_flowsched_async,
}


def _one(name: str, timers: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", name, "--timers", str(timers)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _extra(name: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", name],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument(
        "--backlog", action="store_true", help="every timer already due when firing starts"
    )
    parser.add_argument("--one", choices=[*CONTENDERS, "schedule", "wakeup"])
    parser.add_argument("--workers", type=int, help="handler slots of the node (default 100)")
    args = parser.parse_args()
    url = _url()
    if args.workers:
        os.environ["FLOWSCHED_BENCH_WORKERS"] = str(args.workers)  # the rounds' processes too
        global WORKERS
        WORKERS = args.workers
    if args.backlog:
        os.environ["FLOWSCHED_BENCH_BACKLOG"] = "1"  # for the rounds' processes too
        global BACKLOG
        BACKLOG = True
    if args.one == "schedule":
        print(json.dumps(run_schedule_cost(url)))
        return
    if args.one == "wakeup":
        print(json.dumps(run_wakeup(url)))
        return
    if args.one:
        print(json.dumps(CONTENDERS[args.one](url, args.timers)))
        return
    with psycopg.connect(url) as conn:
        fsync = conn.execute("SHOW fsync").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
        version = conn.execute("SHOW server_version").fetchone()
    print(
        f"PostgreSQL {version and version[0]}, fsync={fsync and fsync[0]}, "
        f"synchronous_commit={sync and sync[0]}; {args.timers} timers "
        + ("already due (a backlog)" if BACKLOG else "due within 1 s")
    )
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
    for round_ in range(args.rounds):
        for name in CONTENDERS:
            runs[name].append(_one(name, args.timers))
            print(f"round {round_ + 1} {name}: {runs[name][-1]}", file=sys.stderr)
    medians = {
        name: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for name, results in runs.items()
    }
    schedule = json.loads(
        subprocess.run(
            [sys.executable, __file__, "--one", "schedule"],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    floor = medians["floor"]
    print(
        f"{'contender':<16}{'fired/s':>10}{'vs floor':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'p99 vs':>8}{'stmts/timer':>13}"
    )
    for name, m in medians.items():
        print(
            f"{name:<16}{m['fired_per_s']:>10.0f}{m['fired_per_s'] / floor['fired_per_s']:>10.2f}"
            f"{m['p50_ms']:>9.1f}{m['p99_ms']:>9.1f}{m['p99_ms'] / floor['p99_ms']:>8.2f}"
            f"{m['statements_per_timer']:>13.3f}"
        )
    print(f"schedule(): {schedule['schedule_us']:.0f} us per call (2,000 calls, one node)")
    wakeup = _extra("wakeup")
    print(
        f"cross-node wake-up (due in 300 ms, firing node polls every 5 s): "
        f"p50 {wakeup['wake_p50_ms']:.1f} ms, p99 {wakeup['wake_p99_ms']:.1f} ms late"
    )
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "postgres.json").write_text(
        json.dumps(
            {"medians": medians, "runs": runs, "schedule": schedule, "wakeup": wakeup}, indent=2
        )
    )


if __name__ == "__main__":
    main()
