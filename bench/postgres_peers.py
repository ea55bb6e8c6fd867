"""PostgresScheduler (both faces) against the floor and five peers, on one PostgreSQL.

    bash tools/with-postgres.sh .venv/bin/python bench/postgres_peers.py [--timers 20000]
        [--rounds 3] [--only floor,flowsched,...]

Needs SQLAlchemy in the venv (a bench-only requirement: ``make bench`` installs it; it is not
a dependency of flowsched) and, for the four peers that run in virtualenvs of their own,
those virtualenvs (``make pg-peers`` builds them; a peer whose virtualenv is missing is
skipped with a note).

Contenders, each in a fresh process and a fresh table or schema, ``--timers`` timers
(default 20,000) due within 1 s, on one node:

* ``floor``, ``flowsched`` and ``flowsched-async``: exactly the runs of
  ``bench/postgres_bench.py`` (imported from it: raw psycopg 3 claim + fenced delete, and
  ``PostgresScheduler`` / ``AsyncPostgresScheduler`` with ``workers=100, batch_size=100``).
* ``apscheduler3``: APScheduler 3's ``BackgroundScheduler`` with a ``SQLAlchemyJobStore``
  (``postgresql+psycopg://``, psycopg 3, the same server), a 64-thread executor,
  ``misfire_grace_time=None`` (run every job however late) and ``coalesce=False``. Its jobs
  are written beforehand in one bulk ``INSERT`` of the rows its own ``add_job`` would write
  (the pickled job state), so that, as for the others, the figures are firing only. Its
  statements are counted with SQLAlchemy's ``before_cursor_execute`` event.
* ``pgqueuer`` (1.6.0), ``procrastinate`` (3.10.0), ``dbos`` (3.4.0, delayed queued
  workflows) and ``apscheduler4`` (4.0.0a6, ``SQLAlchemyDataStore``): run as
  ``bench/.venv-NAME/bin/python bench/postgres_peer_NAME.py --url URL --timers N``; each
  module's docstring says how the peer is configured. They stop 60 s after the first due
  time and report what fired by then (``finished`` false).

Fired per second (first due time to last handler start), p50/p99 lateness (handler start
minus due), statements per fired timer. Rounds alternate the contenders (the order rotates
each round, since the machine is shared and its load drifts); medians of ``--rounds``
(default 3) and ratios to the floor of the same run. Writes
``bench/results/postgres_peers.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pickle
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import postgres_bench as pb

# -- APScheduler 3, SQLAlchemyJobStore ---------------------------------------------------

_LATE: list[float] = []
_LOCK = threading.Lock()
_DONE = threading.Event()
_TARGET = [0]
_LAST = [0.0]


def aps_job(due: float) -> None:
    """The job every APScheduler timer runs: record its lateness (APScheduler keeps a
    textual reference to it, ``__main__:aps_job``)."""
    now = time.time()
    with _LOCK:
        _LATE.append(now - due)
        _LAST[0] = now
        if len(_LATE) >= _TARGET[0]:
            _DONE.set()


def run_apscheduler3(url: str, timers: int) -> dict[str, float]:
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.job import Job
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.date import DateTrigger

    # A bench-only requirement, maybe absent where `make lint` type-checks this file.
    sa: Any = importlib.import_module("sqlalchemy")
    create_engine, event, text = sa.create_engine, sa.event, sa.text

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    statements = [0]

    def count(*_: Any) -> None:
        statements[0] += 1

    table = f"bench_aps_{uuid.uuid4().hex[:8]}"
    store = SQLAlchemyJobStore(engine=engine, tablename=table)
    scheduler = BackgroundScheduler(
        jobstores={"default": store},
        executors={"default": ThreadPoolExecutor(64)},
        job_defaults={"misfire_grace_time": None, "coalesce": False},
        timezone=UTC,
    )
    _TARGET[0] = timers
    start = time.time() + pb.LEAD_S + 2.0  # the pickling and the bulk insert take a moment
    store.start(scheduler, "default")  # creates the table
    rows = []
    for n in range(timers):
        due = start + n * pb.WINDOW_S / timers
        run_date = datetime.fromtimestamp(due, UTC)
        job = Job(
            scheduler,
            id=f"t-{n}",
            func=aps_job,
            args=(due,),
            kwargs={},
            name="aps_job",
            trigger=DateTrigger(run_date, timezone=UTC),
            executor="default",
            misfire_grace_time=None,
            coalesce=False,
            max_instances=1,
            next_run_time=run_date,
        )
        state = pickle.dumps(job.__getstate__(), store.pickle_protocol)
        rows.append({"id": job.id, "next_run_time": due, "job_state": state})
    with engine.begin() as conn:
        conn.execute(store.jobs_t.insert(), rows)
    if time.time() > start:
        print("apscheduler3: the insert ended after the first due time", file=sys.stderr)
    event.listen(engine, "before_cursor_execute", count)
    scheduler.start()
    try:
        if not _DONE.wait(180):
            print(f"apscheduler3: only {len(_LATE)} of {timers} in 180 s", file=sys.stderr)
    finally:
        fired = statements[0]
        scheduler.shutdown(wait=False)
        event.remove(engine, "before_cursor_execute", count)
        with engine.begin() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    return pb._figures(list(_LATE), start, _LAST[0], fired, timers)


CONTENDERS = {
    "floor": pb.run_floor,
    "flowsched": pb.run_flowsched,
    "flowsched-async": pb.run_flowsched_async,
    "apscheduler3": run_apscheduler3,
}


BENCH = Path(__file__).parent
PEERS = ("pgqueuer", "procrastinate", "dbos", "apscheduler4")
"""The peers that run in virtualenvs of their own (bench/.venv-NAME)."""
KEYS = ("fired", "fired_per_s", "p50_ms", "p99_ms", "statements_per_timer")


def _peer_python(name: str) -> Path:
    return BENCH / f".venv-{name}" / "bin" / "python"


def _one(name: str, timers: int, url: str) -> dict[str, Any] | None:
    """One contender's run in a fresh process: its figures, or None (with the reason on
    stderr) when a peer's process failed."""
    if name in PEERS:
        command = [
            str(_peer_python(name)),
            str(BENCH / f"postgres_peer_{name}.py"),
            *("--url", url, "--timers", str(timers)),
        ]
    else:
        command = [sys.executable, __file__, "--one", name, "--timers", str(timers)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if out.stderr.strip():
        print(out.stderr.strip()[-2000:], file=sys.stderr)
    if out.returncode != 0:
        if name not in PEERS:
            raise SystemExit(f"{name} failed (exit {out.returncode})")
        print(f"{name}: its process failed (exit {out.returncode})", file=sys.stderr)
        return None
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    medians: dict[str, Any] = {}
    for key in KEYS:
        values = [r[key] for r in results]
        medians[key] = None if None in values else statistics.median(values)
    medians["finished"] = all(r.get("finished", True) for r in results)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", choices=list(CONTENDERS))
    parser.add_argument("--only", help="comma-separated contenders (default: all)")
    args = parser.parse_args()
    url = pb._url()
    if args.one:
        print(json.dumps(CONTENDERS[args.one](url, args.timers)))
        return
    import psycopg

    with psycopg.connect(url) as conn:
        settings = {
            name: str((conn.execute(f"SHOW {name}").fetchone() or ("?",))[0])
            for name in ("server_version", "fsync", "synchronous_commit")
        }
    print(f"PostgreSQL {settings}; {args.timers} timers due within 1 s; {args.rounds} rounds")
    names = [*CONTENDERS, *PEERS]
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"--only: unknown contenders {unknown}; known: {names}")
        names = [name for name in names if name in wanted]
    skipped = [name for name in names if name in PEERS and not _peer_python(name).exists()]
    for name in skipped:
        print(f"{name}: skipped, no {_peer_python(name)} (make pg-peers builds it)")
    names = [name for name in names if name not in skipped]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            figures = _one(name, args.timers, url)
            if figures is not None:
                runs[name].append(figures)
            print(f"round {round_ + 1} {name}: {figures}", file=sys.stderr)
    medians = {name: _median(results) for name, results in runs.items() if results}
    floor = medians.get("floor")
    ratios = {
        name: {
            "fired_per_s_vs_floor": m["fired_per_s"] / floor["fired_per_s"],
            "p99_vs_floor": m["p99_ms"] / floor["p99_ms"],
        }
        for name, m in medians.items()
        if floor
    }
    others = [name for name in ("apscheduler3", *PEERS) if name in medians]
    vs_peers = {
        ours: {peer: medians[ours]["fired_per_s"] / medians[peer]["fired_per_s"] for peer in others}
        for ours in ("flowsched", "flowsched-async")
        if ours in medians
    }
    print(
        f"{'contender':<16}{'fired':>7}{'fired/s':>10}{'vs floor':>10}{'p50 ms':>10}"
        f"{'p99 ms':>10}{'p99 vs':>9}{'stmts/timer':>13}"
    )
    for name, m in medians.items():
        ratio = ratios.get(name, {})
        stmts = m["statements_per_timer"]
        print(
            f"{name:<16}{m['fired']:>7.0f}{m['fired_per_s']:>10.0f}"
            f"{ratio.get('fired_per_s_vs_floor', float('nan')):>10.3f}{m['p50_ms']:>10.1f}"
            f"{m['p99_ms']:>10.1f}{ratio.get('p99_vs_floor', float('nan')):>9.2f}"
            + (f"{stmts:>13.3f}" if stmts is not None else f"{'-':>13}")
            + ("" if m["finished"] else f"  ({args.timers - m['fired']:.0f} not fired)")
        )
    for ours, ratios_to in vs_peers.items():
        print(f"{ours} fires " + ", ".join(f"{r:.1f}x {p}" for p, r in ratios_to.items()))
    vs_aps = {
        ours: by_peer["apscheduler3"]
        for ours, by_peer in vs_peers.items()
        if "apscheduler3" in by_peer
    }
    ahead = {
        ours: all(r > 1.0 for p, r in by_peer.items() if p != "apscheduler3")
        for ours, by_peer in vs_peers.items()
    }
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "postgres_peers.json").write_text(
        json.dumps(
            {
                "server": settings,
                "timers": args.timers,
                "medians": medians,
                "ratios_to_floor": ratios,
                "fired_per_s_vs_apscheduler3": vs_aps,
                "fired_per_s_vs_peers": vs_peers,
                "ahead_of_every_other_peer": ahead,
                "skipped": skipped,
                "runs": runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
