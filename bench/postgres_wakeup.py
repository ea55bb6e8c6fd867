"""A timer scheduled on one node, due in 300 ms, fired by another node: its lateness.

    bash tools/with-postgres.sh .venv/bin/python bench/postgres_wakeup.py [--samples 200]

The firing node is a process of its own (``PostgresScheduler`` with the default
``poll_interval`` of 1 s, or ``--poll``; LISTEN on); the scheduling node is this process (a
``PostgresScheduler`` that is never started: ``schedule()`` only). One timer at a time, due
300 ms after its ``schedule()``, the next one 300-400 ms (random) later, so the firing node
is asleep, with nothing due, each time a timer is made. Without a wake-up the lateness
would be spread over the poll interval (0-1,000 ms); the goal is p99 ≤ 20 ms.

Lateness is the handler's start minus the timer's due time (one machine, one clock).
Writes ``bench/results/postgres_wakeup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import postgres_bench as pb
import psycopg

ROOT = Path(__file__).resolve().parent.parent


def firing_node(url: str, table: str, log: str, poll_s: str) -> None:
    from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def handler(item: ScheduleItem, attempt: int) -> None:
        late_ms = 1000 * (time.time() - item.due.timestamp())
        os.write(fd, f"{item.id} {late_ms:.3f}\n".encode())

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    scheduler = PostgresScheduler(url, table=table, poll_interval=timedelta(seconds=float(poll_s)))
    scheduler.subscribe(ScheduleKind.TIMER, handler)
    scheduler.start()
    print("ready", flush=True)
    stop.wait()
    scheduler.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--poll", type=float, default=1.0, help="the firing node's poll (s)")
    parser.add_argument("--node", nargs=4, metavar=("URL", "TABLE", "LOG", "POLL"))
    args = parser.parse_args()
    if args.node:
        firing_node(*args.node)
        return
    url = pb._url()
    from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind
    from flowsched.postgres.schema import drop_tables

    table = f"bench_wake_{uuid.uuid4().hex[:8]}"
    scheduling = PostgresScheduler(url, table=table, listen=False)
    with tempfile.TemporaryDirectory() as folder:
        log = f"{folder}/fired.log"
        node = subprocess.Popen(
            [sys.executable, __file__, "--node", url, table, log, str(args.poll)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert node.stdout is not None
            if node.stdout.readline().strip() != "ready":
                sys.exit("the firing node did not start")
            time.sleep(1.0)
            for n in range(args.samples):
                due = datetime.now(UTC) + timedelta(milliseconds=300)
                scheduling.schedule(ScheduleItem(f"w-{n}", ScheduleKind.TIMER, due))
                time.sleep(random.uniform(0.3, 0.4))
            time.sleep(1.5)
        finally:
            node.send_signal(signal.SIGTERM)
            node.wait(30)
            scheduling.close()
            with psycopg.connect(url, autocommit=True) as conn:
                drop_tables(conn, table)
        with open(log) as f:
            late = [float(line.split()[1]) for line in f.read().splitlines()]
    p50, p99 = pb._percentile(late, 0.5), pb._percentile(late, 0.99)
    figures = {
        "samples": args.samples,
        "fired": len(late),
        "p50_ms": p50,
        "p99_ms": p99,
        "max_ms": max(late),
        "min_ms": min(late),
        "poll_interval_s": args.poll,
    }
    print(
        f"{len(late)} of {args.samples} fired; lateness p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
        f"max {max(late):.1f} ms, min {min(late):.1f} ms (goal: p99 <= 20 ms)"
    )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    name = "postgres_wakeup.json" if args.poll == 1.0 else f"postgres_wakeup_poll{args.poll:g}.json"
    (out / name).write_text(json.dumps({**figures, "lateness_ms": late}))


if __name__ == "__main__":
    main()
