"""Several PostgresScheduler node processes on one table: a SIGKILLed node, a server restart.

    bash tools/with-postgres.sh .venv/bin/python bench/postgres_nodes.py [--rounds 2]

Every node is a process of its own (``PostgresScheduler``, ``workers=16``, ``batch_size=100``,
``poll_interval=1 s``, ``lease=3 s`` so that a dead node's claims come back within the run).
Its handler appends ``id generation attempt pid time`` to a file of its own with one
``os.write`` (the kernel has the line as soon as the handler started: a SIGKILL loses none).

* ``kill`` (2 and 4 nodes, on the server at ``FLOWSCHED_POSTGRES_URL``): 10,000 timers due
  within 2 s; when 30 % of them have fired, node 0 is SIGKILLed (in the middle of its
  batches: its claimed rows are still leased to it). Then the survivors run until every
  timer fired (or 40 s). The rows still claimed by the dead node just after the kill are
  counted (they come back when its 3 s lease ends).
* ``restart`` (2 nodes, on a SEPARATE throwaway server: ``tools/start-postgres.sh`` with
  ``PG_HOME=/tmp/flowsched-pg-bench`` or ``$FLOWSCHED_PG_BENCH_HOME``, stopped at the end,
  so the shared test server is never restarted): 6,000 timers due within 6 s; 2 s into
  them, ``pg_ctl restart -m fast -w``.
  "Resumes" is the time from the server accepting connections again (``pg_ctl`` returned)
  to the first handler start after it; the goal is within one poll interval (1 s).

Counted from the files: lost (timers never started), duplicate attempts (starts beyond one
per timer), split into those that follow a start on the killed node (the at-least-once
redelivery of a claim whose node died before settling it) and the others (two live nodes
on one timer: a broken fence), plus rows left in the table and dead letters. Writes
``bench/results/postgres_nodes.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
LEAD_S = 1.5


def node_main(url: str, table: str, log: str, index: int) -> None:
    """One node: fire the table's timers into ``log`` until SIGTERM."""
    from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pid = os.getpid()

    def handler(item: ScheduleItem, attempt: int) -> None:
        line = f"{item.id} {item.generation} {attempt} {pid} {time.time():.6f}\n"
        os.write(fd, line.encode())

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    scheduler = PostgresScheduler(
        url,
        table=table,
        node_id=f"node-{index}-{pid}",
        workers=16,
        batch_size=100,
        lease=timedelta(seconds=3),
        poll_interval=timedelta(seconds=1),
    )
    scheduler.subscribe(ScheduleKind.TIMER, handler)
    scheduler.start()
    print("ready", flush=True)
    stop.wait()
    scheduler.close()


def _insert(url: str, table: str, timers: int, window_s: float) -> float:
    start = time.time() + LEAD_S
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"""INSERT INTO {table} (id, generation, kind, route, due, scheduled_at)
            SELECT 't-' || n, nextval('{table}_generation'), 'TIMER', 'k:TIMER',
                   to_timestamp(%s + n * %s / %s), now()
            FROM generate_series(0, %s - 1) AS n""".encode(),
            (start, window_s, timers, timers),
        )
    return start


def _lines(folder: str) -> list[list[str]]:
    lines: list[list[str]] = []
    for path in glob.glob(os.path.join(folder, "*.log")):
        with open(path) as f:
            lines.extend(line.split() for line in f.read().splitlines() if line.count(" ") == 4)
    return lines


def _start_nodes(url: str, table: str, folder: str, count: int) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    nodes = [
        subprocess.Popen(
            [sys.executable, __file__, "--node", url, table, f"{folder}/{n}.log", str(n)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(count)
    ]
    for node in nodes:
        assert node.stdout is not None
        if node.stdout.readline().strip() != "ready":
            raise RuntimeError("a node did not start")
    return nodes


def _stop(nodes: list[subprocess.Popen[str]]) -> None:
    for node in nodes:
        if node.poll() is None:
            node.send_signal(signal.SIGTERM)
    for node in nodes:
        try:
            node.wait(30)
        except subprocess.TimeoutExpired:
            node.kill()


def _wait_all(folder: str, timers: int, deadline: float) -> None:
    while time.time() < deadline:
        if len({line[0] for line in _lines(folder)}) >= timers:
            return
        time.sleep(0.1)


def _count(url: str, table: str, folder: str, timers: int, victim: int | None) -> dict[str, Any]:
    lines = _lines(folder)
    starts = Counter(line[0] for line in lines)
    on_victim = {line[0] for line in lines if victim is not None and int(line[3]) == victim}
    duplicates = sum(n - 1 for n in starts.values())
    after_kill = sum(starts[i] - 1 for i in on_victim if starts[i] > 1)
    # The starts of a timer after its first: did they know they were a redelivery?
    seen: set[str] = set()
    later_attempts: Counter[int] = Counter()
    for line in sorted(lines, key=lambda line: float(line[4])):
        if line[0] in seen:
            later_attempts[int(line[2])] += 1
        seen.add(line[0])
    with psycopg.connect(url, autocommit=True) as conn:
        left = conn.execute(f"SELECT count(*) FROM {table}".encode()).fetchone()
        dead = conn.execute(f"SELECT count(*) FROM {table}_dead".encode()).fetchone()
        from flowsched.postgres.schema import drop_tables

        drop_tables(conn, table)
    return {
        "timers": timers,
        "lost": timers - len(starts),
        "duplicate_attempts": duplicates,
        "duplicates_redelivered_from_killed_node": after_kill,
        "duplicates_between_live_nodes": duplicates - after_kill,
        "started_on_killed_node": len(on_victim),
        "attempt_numbers_of_repeated_starts": dict(later_attempts),
        "rows_left": left[0] if left else None,
        "dead_letters": dead[0] if dead else None,
    }


def run_kill(url: str, nodes_count: int, timers: int = 10_000) -> dict[str, Any]:
    from flowsched.postgres.schema import migrate

    table = f"bench_nodes_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn, table)
    with tempfile.TemporaryDirectory() as folder:
        nodes = _start_nodes(url, table, folder, nodes_count)
        try:
            _insert(url, table, timers, 2.0)
            deadline = time.time() + 60
            while len(_lines(folder)) < 0.3 * timers and time.time() < deadline:
                time.sleep(0.005)
            victim = nodes[0].pid
            nodes[0].send_signal(signal.SIGKILL)
            killed_at = time.time()
            fired_at_kill = len(_lines(folder))
            nodes[0].wait()
            time.sleep(0.3)  # statements the server had received finish; leases still hold
            with psycopg.connect(url, autocommit=True) as conn:
                held = conn.execute(
                    f"SELECT id, started_at IS NOT NULL FROM {table} WHERE owner LIKE %s".encode(),
                    (f"node-0-{victim}%",),
                ).fetchall()
            _wait_all(folder, timers, time.time() + 40)
            done_at = time.time()
        finally:
            _stop(nodes)
        starts = Counter(line[0] for line in _lines(folder))
        figures = _count(url, table, folder, timers, victim)
    started = {row[0] for row in held if row[1]}
    queued = {row[0] for row in held if not row[1]}
    figures.update(
        nodes=nodes_count,
        fired_when_killed=fired_at_kill,
        rows_claimed_by_killed_node=len(held),
        started_unsettled_on_killed_node=len(started),
        queued_unstarted_on_killed_node=len(queued),
        # The tight bound: only what the killed node had started may start twice; what it
        # only held starts once, as a first attempt.
        duplicates_outside_started_unsettled=sum(
            n - 1 for item, n in starts.items() if n > 1 and item not in started
        ),
        queued_claims_started_more_than_once=sum(1 for item in queued if starts[item] > 1),
        all_fired_s_after_kill=round(done_at - killed_at, 2),
    )
    return figures


# -- a restart of a throwaway server --------------------------------------------------------

BENCH_HOME = os.environ.get("FLOWSCHED_PG_BENCH_HOME", "/tmp/flowsched-pg-bench")


def _bench_server() -> str:
    env = {**os.environ, "PG_HOME": BENCH_HOME}
    out = subprocess.run(
        ["bash", str(ROOT / "tools/start-postgres.sh")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return out.stdout.strip().splitlines()[-1]


def _pg_ctl_restart() -> None:
    bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    data = f"{BENCH_HOME}/data"
    command = [f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60"]
    command += ["-l", f"{BENCH_HOME}/server.log", "restart"]
    if os.getuid() == 0:
        owner = Path(data).owner()
        command = ["runuser", "-u", owner, "--", *command]
    subprocess.run(command, check=True, capture_output=True, cwd=BENCH_HOME)


def run_restart(url: str, timers: int = 6_000) -> dict[str, Any]:
    from flowsched.postgres.schema import migrate

    table = f"bench_restart_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn, table)
    with tempfile.TemporaryDirectory() as folder:
        nodes = _start_nodes(url, table, folder, 2)
        try:
            start = _insert(url, table, timers, 6.0)
            time.sleep(max(0.0, start + 2.0 - time.time()))
            down = time.time()
            _pg_ctl_restart()
            up = time.time()
            _wait_all(folder, timers, time.time() + 40)
        finally:
            _stop(nodes)
        stamps = sorted(float(line[4]) for line in _lines(folder))
        figures = _count(url, table, folder, timers, None)
    after = [t for t in stamps if t >= up]
    figures.update(
        nodes=2,
        restart_took_s=round(up - down, 3),
        resumed_s_after_server_back=round(after[0] - up, 3) if after else None,
        poll_interval_s=1.0,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--node", nargs=4, metavar=("URL", "TABLE", "LOG", "INDEX"))
    parser.add_argument("--skip-restart", action="store_true")
    args = parser.parse_args()
    if args.node:
        url, table, log, index = args.node
        node_main(url, table, log, int(index))
        return
    url = os.environ.get("FLOWSCHED_POSTGRES_URL")
    if not url:
        sys.exit("FLOWSCHED_POSTGRES_URL is not set (run under tools/with-postgres.sh)")
    results: dict[str, list[dict[str, Any]]] = {"kill_2": [], "kill_4": [], "restart": []}
    bench_url = None if args.skip_restart else _bench_server()
    try:
        for round_ in range(args.rounds):
            for count in (2, 4):
                results[f"kill_{count}"].append(run_kill(url, count))
                print(f"round {round_ + 1} kill, {count} nodes: {results[f'kill_{count}'][-1]}")
            if bench_url:
                results["restart"].append(run_restart(bench_url))
                print(f"round {round_ + 1} restart: {results['restart'][-1]}")
    finally:
        if bench_url:
            subprocess.run(
                ["bash", str(ROOT / "tools/start-postgres.sh"), "stop"],
                env={**os.environ, "PG_HOME": BENCH_HOME},
                check=False,
                capture_output=True,
            )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "postgres_nodes.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
