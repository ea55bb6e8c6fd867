"""What the history costs the server per fired timer: serial claim_started + settle cycles.

    FLOWSCHED_POSTGRES_URL=... PYTHONPATH=<tree> python bench/postgres_history_probe.py \
        [--variant tree|nohist] [--timers 20000] [--batch 64]

One process, one connection, no handlers: ``--timers`` rows already due (one
``INSERT ... SELECT``), then ``claim_started`` of ``--batch`` rows and ``settle`` of them
(all completed), in turn, until none is left. ``tree``: the statements of the flowsched on
``PYTHONPATH`` as they are; ``nohist``: the same with the history CTEs of ``claim_started``
and ``settle_completed`` cut out (what the firing path costs with no history at all; the
cut matches the statements of schema version 3 and 4).

Prints the medians of the claim's and the settle's round trips, and per timer: the WAL
written (``pg_current_wal_lsn``; deterministic, load-independent), the buffers touched
(``pg_stat_database``), and the CPU of every process of the server (its postmaster's
children, from ``/proc``: WAL writer, autovacuum and checkpointer included) and of the one
backend serving the probe (the server must run on this host and serve nothing else - start a
fresh one with ``PG_HOME=/tmp/x PG_PORT=n bash tools/start-postgres.sh``). Run the trees
alternating, several rounds: the wall times and the CPU move with the machine's load, the
WAL does not.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg

from flowsched.outcomes import Completed
from flowsched.postgres import queries as query_file
from flowsched.postgres.schema import drop_tables
from flowsched.postgres.store import PostgresTimerStore
from flowsched.store.records import Settlement

_TICK = os.sysconf("SC_CLK_TCK")


def _cut_history() -> None:
    """Cut the history CTEs out of the firing path's statements (the ``nohist`` variant)."""
    statements = query_file._statements()
    for name in ("claim_started", "settle_completed"):
        sql = statements[name]
        sql = re.sub(r"\), (opened|writes) AS \(.*?\n\)\nSELECT", ")\nSELECT", sql, flags=re.S)
        sql = re.sub(r"\), closed AS \(.*?\n\)\nSELECT", ")\nSELECT", sql, flags=re.S)
        statements[name] = sql


def _server_cpu(postmaster: int) -> float:
    """CPU seconds of the postmaster and all its children (backends, WAL writer, ...)."""
    total = 0
    for pid in [postmaster, *map(int, _children(postmaster))]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


def _counters(url: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        wal = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        hit = conn.execute(
            "SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert wal is not None and hit is not None
    return int(wal[0]), int(hit[0])


def _postmaster(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        stat = Path(f"/proc/{row[0]}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["tree", "nohist"], default="tree")
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    url = os.environ["FLOWSCHED_POSTGRES_URL"]
    if args.variant == "nohist":
        _cut_history()
    postmaster = _postmaster(url)
    table = f"probe_{uuid.uuid4().hex[:8]}"
    store = PostgresTimerStore(url, table=table, pool_size=1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"""INSERT INTO "{table}" (id, generation, kind, route, due, scheduled_at)
            SELECT 't-' || n, nextval('"{table}_generation"'), 'TIMER', 'k:TIMER',
                   now() - interval '10 s' + n * interval '0.1 ms', now()
            FROM generate_series(0, %(n)s - 1) AS n""".encode(),
            {"n": args.timers},
        )
        conn.execute(f'ANALYZE "{table}"'.encode())
    with store.pool.connection() as conn:  # the one backend serving the store (pool_size=1)
        pid_row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert pid_row is not None
    backend = int(pid_row[0])
    wal0, hit0 = _counters(url)
    cpu0, own0 = _server_cpu(postmaster), _process_cpu(backend)
    claim_ms: list[float] = []
    settle_ms: list[float] = []
    done = 0
    while done < args.timers:
        began = time.perf_counter()
        claims = store.claim_started(["k:TIMER"], "node", timedelta(seconds=30), args.batch)
        claimed = time.perf_counter()
        if not claims:
            break
        results = store.settle([Settlement(claim, Completed()) for claim in claims])
        settled = time.perf_counter()
        assert all(result.applied for result in results)
        claim_ms.append(1000 * (claimed - began))
        settle_ms.append(1000 * (settled - claimed))
        done += len(claims)
    time.sleep(0.6)  # the WAL writer's share; pg_stat_database is flushed within 1 s idle
    cpu, own = _server_cpu(postmaster) - cpu0, _process_cpu(backend) - own0
    wal1, hit1 = _counters(url)
    with psycopg.connect(url, autocommit=True) as conn:
        count = conn.execute(f'SELECT count(*) FROM "{table}_history"'.encode()).fetchone()
        drop_tables(conn, table)
    store.close()
    claim, settle = statistics.median(claim_ms), statistics.median(settle_ms)
    print(
        f"{args.variant}: claim of {args.batch} {claim:.2f} ms, settle {settle:.2f} ms "
        f"(p50; {1000 * (claim + settle) / args.batch:.1f} us/timer); per timer: "
        f"WAL {(wal1 - wal0) / done:.0f} B, buffers {(hit1 - hit0) / done:.1f}, "
        f"server CPU {1e6 * cpu / done:.1f} us (its backend {1e6 * own / done:.1f}); "
        f"history rows {count and count[0]}"
    )


if __name__ == "__main__":
    main()
