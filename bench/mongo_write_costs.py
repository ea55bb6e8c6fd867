"""What one timer costs the MongoDB server: flowsched's claim and settle against APScheduler 3's.

    python bench/mongo_write_costs.py      # needs FLOWSCHED_MONGO_URI (make bench sets it)

The fire-rate bench (``bench/async_mongo_bench.py``) compares whole nodes. This one takes the
server's work per timer apart, with the commands the nodes really send:

* ``claim read``: the claim query, the ``find`` of
  :meth:`flowsched.mongo.MongoTimerStore.claim_started` (whole documents, oldest first) -
  the call a MongoDB node's core claims with (it starts its claims as it claims them);
* ``claim write``: the same call's claiming ``update_many`` (ids in chunks, fenced on the
  generations read and ``ready_at``), which sets the claim and its start and moves
  ``ready_at`` to the lease's end;
* ``settle``: :meth:`~flowsched.mongo.MongoTimerStore.settle` of the batch as completed
  (the fenced ``delete_many``), and ``history`` the same call's write of the attempts that
  ended to ``<name>_history`` (a node keeps 20 per item by default); ``other`` is anything
  else the store sends meanwhile (``hello``, measuring the server's clock);
* ``aps3 read``/``aps3 write``: what APScheduler 3's ``MongoDBJobStore`` sends for the same
  timers: ``get_due_jobs`` (one ``find`` on ``next_run_time``) and ``remove_job`` (one
  ``delete_one`` per job), on its own documents and index.

Each contender stores COUNT due timers in a fresh database and takes them in batches of
BATCH; the figures are per timer, medians of RUNS runs (the contenders take turns): the
command's time as the client saw it (pymongo command monitoring), and the server process's
CPU time while it ran (read from /proc: only when the server runs on this machine; found as
``bench/mongo_bench.py`` finds it).
The wire server runs one command at a time (it is one Python process), so a node that keeps
it busy fires at about 1 / (server time per timer).

Writes bench/results/mongo_write_costs.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mongo_bench as mb
from pymongo import ASCENDING, MongoClient, monitoring

from flowsched import ScheduleItem, ScheduleKind
from flowsched.mongo import MongoTimerStore
from flowsched.mongo.documents import item_document
from flowsched.outcomes import Completed
from flowsched.store import Settlement

RUNS = int(os.environ.get("FLOWSCHED_BENCH_RUNS", 5))
COUNT = 2000
BATCH = 200  # what a node behind a burst claims at once (two batches of 100)
RESULTS = Path(__file__).with_name("results") / "mongo_write_costs.json"
OURS = ("claim read", "claim write", "settle", "history", "other")
PARTS = (*OURS, "aps3 read", "aps3 write")
WRITES = ("update", "delete", "insert", "bulkWrite")


class Costs(monitoring.CommandListener):
    """Each command's time as the client saw it, and the server's CPU time while it ran,
    summed under the part set in ``label`` (the claim's ``find`` and ``update`` apart, the
    settle's history write apart, anything else flowsched sends as ``other``)."""

    def __init__(self, pid: int | None) -> None:
        self.label = ""
        self.client: dict[str, float] = {}
        self.server: dict[str, float] = {}
        self._pid = pid
        self._started: dict[int, tuple[str, float]] = {}

    def server_cpu(self) -> float:
        """CPU seconds of the server process so far (0 when it is not on this machine)."""
        return 0.0 if self._pid is None else mb.cpu_seconds(self._pid)

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.label:
            part = self._part(event.command_name, event.command.get(event.command_name))
            self._started[event.request_id] = (part, self.server_cpu())

    def _part(self, command: str, target: Any) -> str:
        """The part a command of the current label is filed under."""
        if self.label == "claim":
            if command == "find":
                return "claim read"
            return "claim write" if command in WRITES else "other"
        if self.label == "settle":
            if command not in WRITES and command != "find":
                return "other"
            return "history" if str(target).endswith("_history") else "settle"
        return self.label

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        found = self._started.pop(event.request_id, None)
        if found is None:
            return
        part, started = found
        self.client[part] = self.client.get(part, 0.0) + event.duration_micros / 1e6
        self.server[part] = self.server.get(part, 0.0) + self.server_cpu() - started

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._started.pop(event.request_id, None)

    @contextmanager
    def part(self, label: str) -> Iterator[None]:
        """File the commands sent in this block under ``label``."""
        self.label = label
        try:
            yield
        finally:
            self.label = ""


def flowsched_run(client: MongoClient[Any], costs: Costs) -> None:
    """flowsched's commands, as a MongoDB node's core sends them through its timer store:
    :meth:`MongoTimerStore.claim_started` (find, claiming update) and
    :meth:`MongoTimerStore.settle` (the fenced delete, the history), on its documents and
    indexes, judged by the server's clock as a node's are."""
    database = client[f"fs_costs_{uuid.uuid4().hex[:8]}"]
    try:
        store = MongoTimerStore(database["timers"], node="costs")
        store.open()  # the indexes and the bucket count, as a node's first call does
        due = datetime.now(UTC) - timedelta(seconds=1)
        items = [ScheduleItem(f"fire-{n}", ScheduleKind.TIMER, due) for n in range(COUNT)]
        database["timers"].insert_many(
            item_document(item, generation=n + 1) for n, item in enumerate(items)
        )
        lease = timedelta(seconds=30)
        taken = 0
        while taken < COUNT:
            with costs.part("claim"):
                claimed = store.claim_started([items[0].route], "costs", lease, BATCH)
            if not claimed:
                raise RuntimeError("the claim took nothing: is the collection shared?")
            outcomes = [Settlement.of(claim, Completed()) for claim in claimed]
            with costs.part("settle"):
                settled = store.settle(outcomes)
            if not all(result.applied for result in settled):
                raise RuntimeError("a settle did not apply: is the collection shared?")
            taken += len(outcomes)
    finally:
        client.drop_database(database.name)


def aps3_run(client: MongoClient[Any], costs: Costs) -> None:
    """APScheduler 3's MongoDBJobStore commands, as it sends them: its index
    (``next_run_time``), its documents (a pickled job state), ``get_due_jobs`` then
    ``remove_job`` per job."""
    database = client[f"fs_costs_{uuid.uuid4().hex[:8]}"]
    try:
        jobs = database["jobs"]
        jobs.create_index([("next_run_time", ASCENDING)], sparse=True)
        due = time.time() - 1
        state = os.urandom(400)  # about the size of a pickled one-shot job's state
        jobs.insert_many(
            {"_id": f"fire-{n}", "next_run_time": due + n / 1e6, "job_state": state}
            for n in range(COUNT)
        )
        taken = 0
        while taken < COUNT:
            query = {"next_run_time": {"$lte": time.time()}}
            with costs.part("aps3 read"):
                found = list(jobs.find(query).sort("next_run_time", ASCENDING).limit(BATCH))
            with costs.part("aps3 write"):
                for doc in found:
                    jobs.delete_one({"_id": doc["_id"]})
            taken += len(found)
    finally:
        client.drop_database(database.name)


def main() -> int:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        sys.exit("set FLOWSCHED_MONGO_URI (the server to measure)")
    probe: MongoClient[Any] = MongoClient(uri)
    host, port = probe.address or ("", 0)
    probe.close()
    pid = mb.server_pid(port) if host in ("127.0.0.1", "localhost", "::1") else None
    runs: list[dict[str, dict[str, float]]] = []
    for run in range(RUNS):
        costs = Costs(pid)
        client: MongoClient[Any] = MongoClient(uri, tz_aware=True, event_listeners=[costs])
        try:
            contenders = [flowsched_run, aps3_run]
            for contender in contenders if run % 2 == 0 else contenders[::-1]:
                contender(client, costs)
        finally:
            client.close()
        per_timer = {
            part: {
                "client_ms": costs.client.get(part, 0.0) * 1000 / COUNT,
                "server_cpu_ms": costs.server.get(part, 0.0) * 1000 / COUNT,
            }
            for part in PARTS
        }
        runs.append(per_timer)
        print(f"  run {run}: {json.dumps(per_timer)}", file=sys.stderr)
    medians = {
        part: {k: statistics.median(r[part][k] for r in runs) for k in runs[0][part]}
        for part in PARTS
    }
    ours = {k: sum(medians[p][k] for p in OURS) for k in ("client_ms", "server_cpu_ms")}
    theirs = {k: sum(medians[p][k] for p in ("aps3 read", "aps3 write")) for k in ours}
    results = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "count": COUNT,
        "batch": BATCH,
        "runs": RUNS,
        "server_cpu_measured": pid is not None,
        "per_timer_medians": medians,
        "flowsched_per_timer": ours,
        "aps3_per_timer": theirs,
        "every_run": runs,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"Per timer, {COUNT} due, batches of {BATCH}, medians of {RUNS} runs (ms):")
    print(f"  {'part':<12} {'client':>8} {'server CPU':>11}")
    for part, m in medians.items():
        print(f"  {part:<12} {m['client_ms']:>8.3f} {m['server_cpu_ms']:>11.3f}")
    for name, total in (("flowsched", ours), ("aps3", theirs)):
        print(f"  {name:<12} {total['client_ms']:>8.3f} {total['server_cpu_ms']:>11.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
