"""``schedule()`` and an idle node, at 10,000 and at 1,000,000 stored rows, on one PostgreSQL.

    bash tools/with-postgres.sh .venv/bin/python bench/postgres_flat_costs.py [--big 1000000]

Two tables are filled beforehand with one ``INSERT ... SELECT generate_series`` each, in the
scheduler's own row format (timers due 1 to 2 days ahead, so none fires), then
``ANALYZE``d. Then, in one process, the two sizes take turns:

* ``schedule()``: ``--calls`` (default 500) new timers (due in an hour) per turn on a
  ``PostgresScheduler(listen=False)`` of that table, 4 turns each; the figure is the median
  of the turns' mean microseconds per call. The goal: 1,000,000 rows ≤ 1.2x 10,000 rows.
* idle: a started node (``poll_interval=1 s``, LISTEN on) with nothing due for ``--idle``
  seconds (default 8): statements per second (counted as ``bench/postgres_bench.py`` does)
  and this process's CPU seconds per second while it idles, 2 turns each.

Writes ``bench/results/postgres_flat_costs.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import postgres_bench as pb
import psycopg

STATEMENTS = [0]
_COUNTING = threading.Lock()


def _count_statements() -> None:
    """Count every statement a plan runs (as ``bench/postgres_bench.py`` does)."""
    from flowsched.postgres import plans

    sync_steps = plans._sync_steps

    def counted(conn: psycopg.Connection[Any], plan: plans.Plan[Any]) -> Any:
        def statements() -> plans.Plan[Any]:
            step = next(plan)
            while True:
                with _COUNTING:
                    STATEMENTS[0] += 1
                rows = yield step
                try:
                    step = plan.send(rows)
                except StopIteration as stop:
                    return stop.value

        return sync_steps(conn, statements())

    plans._sync_steps = counted


def _fill(url: str, table: str, rows: int) -> float:
    from flowsched.postgres.schema import migrate

    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn, table)
        conn.execute(
            f"""INSERT INTO {table} (id, generation, kind, route, due, scheduled_at)
            SELECT 'stored-' || n, nextval('{table}_generation'), 'TIMER', 'k:TIMER',
                   now() + interval '1 day' + n * interval '1 ms', now()
            FROM generate_series(1, %s) AS n""".encode(),
            (rows,),
        )
        conn.execute(f"ANALYZE {table}".encode())
    return time.perf_counter() - began


def _schedule_turn(scheduler: Any, prefix: str, calls: int) -> float:
    from flowsched import ScheduleItem, ScheduleKind

    due = datetime.now(UTC) + timedelta(hours=1)
    began = time.perf_counter()
    for n in range(calls):
        scheduler.schedule(ScheduleItem(f"{prefix}-{n}", ScheduleKind.TIMER, due))
    return 1e6 * (time.perf_counter() - began) / calls


def _idle_turn(url: str, table: str, seconds: float) -> dict[str, float]:
    from flowsched import PostgresScheduler, ScheduleKind

    scheduler = PostgresScheduler(url, table=table, poll_interval=timedelta(seconds=1))
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    scheduler.start()
    try:
        time.sleep(1.5)  # past the start-up statements
        statements, cpu, wall = STATEMENTS[0], time.process_time(), time.perf_counter()
        time.sleep(seconds)
        wall = time.perf_counter() - wall
        figures = {
            "statements_per_s": (STATEMENTS[0] - statements) / wall,
            "cpu_ms_per_s": 1000 * (time.process_time() - cpu) / wall,
        }
    finally:
        scheduler.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--idle", type=float, default=8.0)
    args = parser.parse_args()
    url = pb._url()
    from flowsched import PostgresScheduler
    from flowsched.postgres.schema import drop_tables

    _count_statements()
    sizes = {"small": args.small, "big": args.big}
    tables = {name: f"bench_flat_{name}_{uuid.uuid4().hex[:6]}" for name in sizes}
    fill_s: dict[str, float] = {}
    schedule_us: dict[str, list[float]] = {name: [] for name in sizes}
    idle: dict[str, list[dict[str, float]]] = {name: [] for name in sizes}
    try:
        for name, rows in sizes.items():
            fill_s[name] = _fill(url, tables[name], rows)
            print(f"{rows} rows written in {fill_s[name]:.1f} s")
        schedulers = {
            name: PostgresScheduler(url, table=tables[name], listen=False) for name in sizes
        }
        try:
            for turn in range(args.turns):
                order = list(sizes) if turn % 2 == 0 else list(reversed(sizes))
                for name in order:
                    us = _schedule_turn(schedulers[name], f"new-{turn}", args.calls)
                    schedule_us[name].append(us)
                    print(f"turn {turn + 1} schedule() at {sizes[name]} rows: {us:.0f} us")
        finally:
            for scheduler in schedulers.values():
                scheduler.close()
        for turn in range(2):
            order = list(sizes) if turn % 2 == 0 else list(reversed(sizes))
            for name in order:
                idle[name].append(_idle_turn(url, tables[name], args.idle))
                print(f"turn {turn + 1} idle at {sizes[name]} rows: {idle[name][-1]}")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            for table in tables.values():
                drop_tables(conn, table)
    medians = {name: statistics.median(values) for name, values in schedule_us.items()}
    idle_medians = {
        name: {key: statistics.median(turn[key] for turn in turns) for key in turns[0]}
        for name, turns in idle.items()
    }
    ratio = medians["big"] / medians["small"]
    print(
        f"schedule(): {medians['small']:.0f} us at {args.small} rows, {medians['big']:.0f} us "
        f"at {args.big} rows: {ratio:.2f}x (goal <= 1.2x)"
    )
    for name, m in idle_medians.items():
        print(
            f"idle at {sizes[name]} rows: {m['statements_per_s']:.2f} statements/s, "
            f"{m['cpu_ms_per_s']:.1f} ms CPU per s"
        )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "postgres_flat_costs.json").write_text(
        json.dumps(
            {
                "rows": sizes,
                "fill_s": fill_s,
                "schedule_us": schedule_us,
                "schedule_us_median": medians,
                "schedule_ratio_big_vs_small": ratio,
                "idle": idle,
                "idle_median": idle_medians,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
