"""A timer scheduled on one node, due in 300 ms, fired by another node: its lateness.

    bash tools/with-postgres.sh .venv/bin/python bench/postgres_wakeup.py \\
        [--samples 150] [--rounds 3] [--faces sync async] [--base /tmp/base-tree] [--trace]

The firing node is a process of its own (``PostgresScheduler`` or ``AsyncPostgresScheduler``
with the default ``poll_interval`` of 1 s, or ``--poll``; LISTEN on); the scheduling node is
this process (a ``PostgresScheduler`` that is never started: ``schedule()`` only). One timer
at a time, due 300 ms after its ``schedule()``, the next one 300-400 ms (random) later, so
the firing node is asleep, with nothing due, each time a timer is made. Without a wake-up
the lateness would be spread over the poll interval (0-1,000 ms); the goal is p99 ≤ 20 ms.

Lateness is the handler's start minus the timer's due time (one machine, one clock).

``--base DIR``: also run the firing node from the flowsched tree in DIR (an older commit,
``git archive``), alternating with this tree within each round, so that both see the same
load; the report gives each run and the medians over rounds. ``--trace``: the firing node
also stamps its store calls, and the report splits each lateness into where it went (see
``wakeup_trace.py``). ``--floor``: each round also runs the floor (``wakeup_floor.py``: raw
psycopg, one round trip after the due time), as a peer under the same load. Writes
``bench/results/postgres_wakeup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import postgres_bench as pb
import psycopg
import wakeup_trace

ROOT = Path(__file__).resolve().parent.parent


def firing_node(url: str, table: str, log: str, poll_s: str, face: str, trace: str) -> None:
    if face == "floor":
        import wakeup_floor

        wakeup_floor.firing_node(url, table, trace, log)  # trace: the channel, for the floor
        return
    from flowsched import AsyncPostgresScheduler, PostgresScheduler, ScheduleItem, ScheduleKind

    marks = wakeup_trace.install() if trace == "1" else None
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def handler(item: ScheduleItem, attempt: int) -> None:
        now = time.time()
        if marks is not None:
            marks.append((now, "handler", item.id))
        os.write(fd, f"{item.id} {1000 * (now - item.due.timestamp()):.3f}\n".encode())

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    poll = timedelta(seconds=float(poll_s))
    if face == "sync":
        scheduler = PostgresScheduler(url, table=table, poll_interval=poll)
        scheduler.subscribe(ScheduleKind.TIMER, handler)
        scheduler.start()
        print("ready", flush=True)
        stop.wait()
        scheduler.close()
    else:
        import asyncio

        async def run() -> None:
            node = AsyncPostgresScheduler(url, table=table, poll_interval=poll)

            async def on_timer(item: ScheduleItem, attempt: int) -> None:
                handler(item, attempt)

            node.subscribe(ScheduleKind.TIMER, on_timer)
            await node.start()
            print("ready", flush=True)
            while not stop.is_set():
                await asyncio.sleep(0.05)
            await node.aclose()

        asyncio.run(run())
    if marks is not None:
        Path(f"{log}.trace").write_text(json.dumps(marks))


def one_run(
    url: str, tree: Path, face: str, samples: int, poll: float, trace: bool
) -> dict[str, Any]:
    """One firing node (flowsched from ``tree``) and ``samples`` timers: its figures."""
    from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind
    from flowsched.postgres import PostgresTimerStore
    from flowsched.postgres.schema import drop_tables

    table = f"bench_wake_{uuid.uuid4().hex[:8]}"
    scheduling = PostgresScheduler(url, table=table, listen=False)
    with tempfile.TemporaryDirectory() as folder:
        log = f"{folder}/fired.log"
        command = [sys.executable, __file__, "--node", url, table, log, str(poll), face]
        store = scheduling.store
        assert isinstance(store, PostgresTimerStore)
        last = store.setup.queries.channel if face == "floor" else str(int(trace))
        node = subprocess.Popen(
            [*command, last],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT / 'bench'}"},
        )
        try:
            assert node.stdout is not None
            if node.stdout.readline().strip() != "ready":
                sys.exit("the firing node did not start")
            time.sleep(1.0)
            for n in range(samples):
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
        fired = dict(line.split() for line in Path(log).read_text().splitlines())
        late = [float(value) for value in fired.values()]
        traced = trace and face != "floor"
        parts = wakeup_trace.split(log, {k: float(v) for k, v in fired.items()}) if traced else {}
    return {
        "tree": str(tree),
        "face": face,
        "samples": samples,
        "fired": len(late),
        "p50_ms": pb._percentile(late, 0.5),
        "p99_ms": pb._percentile(late, 0.99),
        "max_ms": max(late),
        "poll_interval_s": poll,
        "load_avg_1m": os.getloadavg()[0],
        **({"parts_ms": parts} if parts else {}),
        "lateness_ms": late,
    }


def _name(tree: Path, face: str) -> str:
    if face == "floor":
        return "floor"
    return f"{face} {'this tree' if tree == ROOT else f'base {tree.name}'}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--faces", nargs="+", default=["sync", "async"])
    parser.add_argument("--poll", type=float, default=1.0, help="the firing node's poll (s)")
    parser.add_argument("--base", type=Path, help="a flowsched tree to compare with")
    parser.add_argument("--trace", action="store_true", help="split the lateness")
    parser.add_argument("--floor", action="store_true", help="run the floor too (each round)")
    parser.add_argument("--node", nargs=6, metavar=("URL", "TABLE", "LOG", "POLL", "FACE", "T"))
    args = parser.parse_args()
    if args.node:
        firing_node(*args.node)
        return
    url = pb._url()
    trees = [ROOT] + ([args.base.resolve()] if args.base else [])
    runs: list[dict[str, Any]] = []
    faces = [*args.faces, *(["floor"] if args.floor else [])]
    for round_ in range(args.rounds):
        for face in faces:
            order = trees if round_ % 2 == 0 else trees[::-1]  # alternate who goes first
            order = order[:1] if face == "floor" else order
            for tree in order:
                run = one_run(url, tree, face, args.samples, args.poll, args.trace)
                runs.append({"round": round_ + 1, **run})
                name = _name(tree, face)
                print(
                    f"round {round_ + 1} {name:34} p50 {run['p50_ms']:6.1f} ms  "
                    f"p99 {run['p99_ms']:6.1f} ms  max {run['max_ms']:6.1f} ms  "
                    f"load {run['load_avg_1m']:.2f}  {wakeup_trace.describe(run)}",
                    flush=True,
                )
    summary: dict[str, Any] = {}
    for face in faces:
        for tree in trees[:1] if face == "floor" else trees:
            same = [r for r in runs if r["face"] == face]
            mine = same if face == "floor" else [r for r in same if r["tree"] == str(tree)]
            if not mine:
                continue
            key = _name(tree, face).replace(f"base {tree.name}", "base")
            summary[key] = {
                "p50_ms_median": statistics.median(r["p50_ms"] for r in mine),
                "p99_ms_median": statistics.median(r["p99_ms"] for r in mine),
                "p99_ms_runs": [r["p99_ms"] for r in mine],
            }
            print(f"{key:16} medians over {len(mine)} rounds: {summary[key]}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    name = "postgres_wakeup.json" if args.poll == 1.0 else f"postgres_wakeup_poll{args.poll:g}.json"
    (out / name).write_text(json.dumps({"summary": summary, "runs": runs}))


if __name__ == "__main__":
    main()
