"""Bursts of replaces and cancels 10-30 ms apart on 3 nodes with idle workers, larger than the
tests (tests/mongo/test_mongo_seam_burst.py, tests/postgres/test_postgres_seam_burst.py):
counts, for a soak run.

    bash tools/with-mongo.sh bash tools/with-postgres.sh \\
        .venv/bin/python bench/seam_burst.py [--store all|mongo|postgres] [--rounds 3]

Each round is one :class:`flowsched.testing.seam_burst.SeamBurst` over three fresh nodes
(each with its own client or pool) on a fresh collection or table; the nodes' start checks
are reported to it. Printed per round and in total: operations, starts, and

* ``stale``: handlers called after their form's successor (a replace, or a cancel that
  answered True) had returned - the check had answered before (see the module);
* ``unchecked``: starts with no check, or on a check sent after the successor returned -
  the promise broken (must be 0);
* ``unrecorded``: stale starts that ``history`` does not list (must be 0).

On MongoDB a claim that records the start of the claims it won and starts at once
(``claim_started``, the node core's start on claim) is reported as their check
(``flowsched.testing.mongo_burst``): ``stale`` counts starts by the time the handler was
called, ``unchecked`` by the recorded start (a claim sent after the successor returned).
A stale start whose recorded start the server acknowledged and then lost (its removal
returned the form without it: ``ServerRecord``, a broken single-document atomicity) is
printed and not counted as ``unrecorded``.

Writes ``bench/results/seam_burst.json``; exits 1 if ``unchecked`` or ``unrecorded`` is not 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from flowsched.port import SchedulerPort
from flowsched.testing.seam_burst import BurstReport, SeamBurst

RESULTS = Path(__file__).resolve().parent / "results" / "seam_burst.json"
MONGO_URI = "mongodb://127.0.0.1:27017/?directConnection=true"
POLL = timedelta(milliseconds=200)
SERVER: list[Any] = []  # the MongoDB round's ServerRecord (flowsched.testing.mongo_burst)


@contextlib.contextmanager
def mongo_nodes(burst_box: list[SeamBurst]) -> Iterator[list[SchedulerPort]]:
    from pymongo import MongoClient

    from flowsched import HistoryPolicy, MongoScheduler
    from flowsched.testing.mongo_burst import reported_checks

    uri = os.environ.get("FLOWSCHED_MONGO_URI", MONGO_URI)
    name = f"fs_burst_{uuid.uuid4().hex[:10]}"
    clients: list[Any] = [MongoClient(uri) for _ in range(3)]
    history = HistoryPolicy(limit=1000)  # every form's attempt stays listed
    nodes = [
        MongoScheduler(c[name]["timers"], node_id=f"n{k}", poll_interval=POLL, history=history)
        for k, c in enumerate(clients)
    ]

    class Burst:  # the burst is made once the nodes are: report to it then
        def checked(self, item_id: str, generation: int | None, sent: float | None = None) -> None:
            burst_box[0].checked(item_id, generation, sent)

    try:
        with reported_checks(Burst()) as server:  # a claim recording the start, a confirm
            SERVER[:] = [server]
            yield list(nodes)
    finally:
        for node in nodes:
            node.close()
        clients[0].drop_database(name)
        for client in clients:
            client.close()


@contextlib.contextmanager
def postgres_nodes(burst_box: list[SeamBurst]) -> Iterator[list[SchedulerPort]]:
    import psycopg

    from flowsched import HistoryPolicy, PostgresScheduler
    from flowsched.postgres.schema import drop_tables
    from flowsched.postgres.store import PostgresTimerStore

    url = os.environ["FLOWSCHED_POSTGRES_URL"]
    table = f"fs_burst_{uuid.uuid4().hex[:10]}"
    history = HistoryPolicy(limit=1000)
    nodes = [
        PostgresScheduler(url, table=table, node_id=f"n{k}", poll_interval=POLL, history=history)
        for k in range(3)
    ]
    # The claims a confirm - or a claim that records the start, where the store has one -
    # returned, as checked when that call was sent.
    names = [n for n in ("confirm_start", "claim_started") if hasattr(PostgresTimerStore, n)]
    originals = {name: getattr(PostgresTimerStore, name) for name in names}

    def reporting(call: Callable[..., Any]) -> Callable[..., Any]:
        def reported(*args: Any, **kwargs: Any) -> Any:
            sent = time.monotonic()
            claims = call(*args, **kwargs)
            for claim in claims:
                burst_box[0].checked(claim.item.id, claim.item.generation, sent)
            return claims

        return reported

    for name, original in originals.items():
        setattr(PostgresTimerStore, name, reporting(original))
    try:
        yield list(nodes)
    finally:
        for name, original in originals.items():
            setattr(PostgresTimerStore, name, original)
        for node in nodes:
            node.close()
        with psycopg.connect(url, autocommit=True) as conn:
            drop_tables(conn, table)


STORES: dict[str, Callable[[list[SeamBurst]], contextlib.AbstractContextManager[list[Any]]]] = {
    "mongo": mongo_nodes,
    "postgres": postgres_nodes,
}


def one_round(store: str, operations: int, seed: int) -> BurstReport:
    box: list[SeamBurst] = []
    SERVER.clear()
    with STORES[store](box) as nodes:
        box.append(SeamBurst(nodes, seed=seed))
        report = box[0].run(operations=operations)
        if SERVER:
            report = SERVER[0].excused(report)
            for stale in SERVER[0].excused_starts:
                print(f"  start lost by the server: {stale}", flush=True)
        return report


def summary(reports: list[BurstReport]) -> dict[str, Any]:
    late = [s.late * 1000 for r in reports for s in r.stale]
    return {
        "rounds": len(reports),
        "operations": sum(r.operations for r in reports),
        "starts": sum(r.starts for r in reports),
        "cancels_true": sum(r.cancels_true for r in reports),
        "stale": len(late),
        "stale_late_ms_max": round(max(late), 2) if late else None,
        "unchecked": sum(len(r.unchecked) + len(r.uncheck_started) for r in reports),
        "unrecorded": sum(len(r.unrecorded) for r in reports),
        "unfired": sum(len(r.unfired) for r in reports),
        "errors": sum(len(r.errors) for r in reports),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["all", *STORES], default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mongo-operations", type=int, default=1500)
    parser.add_argument("--postgres-operations", type=int, default=6000)
    args = parser.parse_args()
    stores = list(STORES) if args.store == "all" else [args.store]
    sizes = {"mongo": args.mongo_operations, "postgres": args.postgres_operations}
    results: dict[str, Any] = {}
    for store in stores:
        if store == "postgres" and "FLOWSCHED_POSTGRES_URL" not in os.environ:
            print("postgres: FLOWSCHED_POSTGRES_URL not set, skipped")
            continue
        reports = []
        for n in range(args.rounds):
            report = one_round(store, sizes[store], seed=n)
            print(f"{store} round {n}: {report.describe()}", flush=True)
            reports.append(report)
        results[store] = summary(reports)
        print(f"{store}: {json.dumps(results[store])}", flush=True)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    broken = sum(r["unchecked"] + r["unrecorded"] for r in results.values())
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
