"""MongoScheduler against APScheduler 3.11's MongoDBJobStore, side by side on one server.

    bash tools/with-mongo.sh .venv/bin/python bench/mongo_bench.py     (or: make bench)

Measures, in one run and on the same server (``FLOWSCHED_MONGO_URI``):

* the server's own raw rate: ``insert_one`` in a loop (read every other figure against it);
* schedule cost per item at N = 2,000 on running schedulers (flowsched ``schedule``,
  APScheduler ``add_job``), and APScheduler's paused best case;
* N = 2,000 items due within 1 s: p50/p99 lateness (handler start minus due), fired per
  second (N over first due to last handler start), and server round trips per fired item
  (pymongo command monitoring while firing).

Both use a 1 s poll (APScheduler wakes at the next due time, no poll) and 8 handler threads.
Prints a table and writes ``bench/results/mongo.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo import MongoClient, monitoring

from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

N = 2000
WINDOW = timedelta(seconds=1)
POLL = timedelta(seconds=1)
BATCH = 100
WORKERS = 8
RESULTS = Path(__file__).with_name("results") / "mongo.json"


class Commands(monitoring.CommandListener):
    """Counts commands (= server round trips) sent through one client."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        with self._lock:
            self.count += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> int:
        with self._lock:
            count, self.count = self.count, 0
        return count


class Firings:
    """Collects the lateness of every delivery; ``done`` is set at the N-th."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.late: list[float] = []
        self.last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def record(self, due: datetime) -> None:
        now = datetime.now(UTC)
        with self._lock:
            self.late.append((now - due).total_seconds())
            self.last = time.time()
            if len(self.late) >= self.expected:
                self.done.set()

    def summary(self, first_due: datetime, round_trips: int) -> dict[str, float]:
        late = sorted(self.late)
        span = self.last - first_due.timestamp()
        return {
            "fired": len(late),
            "p50_lateness_s": round(statistics.median(late), 3),
            "p99_lateness_s": round(late[int(len(late) * 0.99) - 1], 3),
            "max_lateness_s": round(late[-1], 3),
            "fired_per_s": round(len(late) / span, 1),
            "round_trips_per_fired": round(round_trips / len(late), 4),
        }


# APScheduler stores a textual reference to its job function: the job records into the
# Firings of the run in progress.
CURRENT: list[Firings] = []


def apscheduler_job(due: datetime) -> None:
    CURRENT[-1].record(due)


@contextmanager
def database(uri: str, commands: Commands | None = None) -> Iterator[Any]:
    """A fresh database on a client of its own (monitored by ``commands``), dropped after.

    APScheduler closes its job store's client on shutdown: cleanup uses another client."""
    listeners = [commands] if commands else []
    client: Any = MongoClient(uri, tz_aware=True, event_listeners=listeners)
    name = f"fs_bench_{uuid.uuid4().hex[:8]}"
    try:
        yield client[name]
    finally:
        client.close()
        with MongoClient(uri) as cleanup:
            cleanup.drop_database(name)


def per_item_us(count: int, action: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for n in range(count):
        action(n)
    return (time.perf_counter() - start) / count * 1e6


def due_times(count: int, lead: timedelta) -> list[datetime]:
    first = datetime.now(UTC) + lead
    return [first + WINDOW * n / count for n in range(count)]


def wait_for(condition: Callable[[], bool], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark did not finish firing in time")
        time.sleep(0.05)


# -- the server alone ---------------------------------------------------------------------


def server_insert_rate(uri: str) -> dict[str, float]:
    with database(uri) as db:
        collection = db["raw"]
        us = per_item_us(N, lambda n: collection.insert_one({"_id": n, "due": datetime.now(UTC)}))
    return {"insert_one_us": round(us, 1), "inserts_per_s": round(1e6 / us, 1)}


# -- flowsched ----------------------------------------------------------------------------


def flowsched_schedule(uri: str) -> float:
    with database(uri) as db:
        scheduler = MongoScheduler(db["timers"], poll_interval=POLL)
        scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
        scheduler.exists("warm-up")  # index creation is not part of the per-item cost
        later = datetime.now(UTC) + timedelta(hours=1)
        with scheduler:  # running, as in production: its sweeper polls meanwhile
            return per_item_us(
                N,
                lambda n: scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, later)),
            )


def flowsched_firing(uri: str, count: int, schedule_us: float) -> dict[str, float]:
    firings = Firings(count)
    commands = Commands()
    with database(uri, commands) as db:
        scheduler = MongoScheduler(
            db["timers"], poll_interval=POLL, batch_size=BATCH, workers=WORKERS
        )
        scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: firings.record(item.due))
        lead = timedelta(microseconds=schedule_us * count * 2) + timedelta(seconds=1)
        dues = due_times(count, lead)
        with scheduler:
            for n, due in enumerate(dues):
                scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, due))
            commands.take()
            if not firings.done.wait(600):
                raise TimeoutError("flowsched did not fire every item")
            wait_for(lambda: db["timers"].estimated_document_count() == 0)
            round_trips = commands.take()
    return firings.summary(dues[0], round_trips)


# -- APScheduler 3.11 ---------------------------------------------------------------------


def apscheduler(db: Any) -> Any:
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.mongodb import MongoDBJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    store = MongoDBJobStore(database=db.name, collection="jobs", client=db.client)
    return BackgroundScheduler(
        jobstores={"default": store},
        executors={"default": ThreadPoolExecutor(WORKERS)},
        # Run every job however late (its default would drop jobs > 1 s late), one run each.
        job_defaults={"misfire_grace_time": None, "coalesce": False},
        timezone=UTC,
    )


def apscheduler_schedule(uri: str, paused: bool) -> float:
    """``add_job`` cost on a running scheduler (each add wakes its loop, which queries the
    store), or on a paused one (the job store's insert alone: APScheduler's best case)."""
    with database(uri) as db:
        scheduler = apscheduler(db)
        scheduler.start(paused=paused)
        later = datetime.now(UTC) + timedelta(hours=1)
        try:
            return per_item_us(
                N,
                lambda n: scheduler.add_job(
                    apscheduler_job, "date", run_date=later, args=[later], id=f"t-{n}"
                ),
            )
        finally:
            scheduler.shutdown(wait=False)


def apscheduler_firing(uri: str, count: int, schedule_us: float) -> dict[str, float]:
    firings = Firings(count)
    CURRENT.append(firings)
    commands = Commands()
    with database(uri, commands) as db:
        scheduler = apscheduler(db)
        scheduler.start(paused=True)
        lead = timedelta(microseconds=schedule_us * count * 2) + timedelta(seconds=1)
        dues = due_times(count, lead)
        for n, due in enumerate(dues):
            scheduler.add_job(apscheduler_job, "date", run_date=due, args=[due], id=f"t-{n}")
        commands.take()
        scheduler.resume()
        try:
            if not firings.done.wait(600):
                raise TimeoutError("APScheduler did not fire every job")
            wait_for(lambda: db["jobs"].estimated_document_count() == 0)
            round_trips = commands.take()
        finally:
            scheduler.shutdown(wait=True)
    return firings.summary(dues[0], round_trips)


# -- report -------------------------------------------------------------------------------


def report(results: dict[str, Any]) -> None:
    ours, theirs, server = results["flowsched"], results["apscheduler"], results["server"]
    rows = [
        ("schedule, us per item (N=2,000)", "schedule_us", "lower"),
        ("fired per second", "fired_per_s", "higher"),
        ("p50 lateness, s", "p50_lateness_s", "lower"),
        ("p99 lateness, s", "p99_lateness_s", "lower"),
        ("server round trips per fired item", "round_trips_per_fired", "lower"),
    ]
    print(f"\nMongoDB scheduler benchmark, N={N} due within {WINDOW.total_seconds():g}s")
    print(f"server: {results['server_version']} at {results['uri_host']}")
    print(f"server raw insert_one: {server['insert_one_us']} us ({server['inserts_per_s']}/s)")
    paused = results["apscheduler_paused_schedule_us"]
    print(f"APScheduler add_job while paused (its best case): {paused} us per item\n")
    print(f"{'metric':36} {'flowsched':>12} {'APScheduler':>12} {'better by':>10}")
    for label, key, better in rows:
        a, b = ours[key], theirs[key]
        ratio = (b / a if better == "lower" else a / b) if a and b else float("nan")
        print(f"{label:36} {a:>12} {b:>12} {ratio:>9.2f}x")
    small = results["small"]
    print(f"\nthe same with N={small['n']} due within {WINDOW.total_seconds():g}s:")
    for label, key, _ in rows[1:]:
        print(f"{label:36} {small['flowsched'][key]:>12} {small['apscheduler'][key]:>12}")
    targets = results["targets"]
    print("\ntargets:")
    for name, verdict in targets.items():
        print(f"  {name:55} {'met' if verdict['met'] else 'NOT met'} ({verdict['value']})")


def targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    ours, theirs = results["flowsched"], results["apscheduler"]
    small = results["small"]["flowsched"]
    speedup = theirs["schedule_us"] / ours["schedule_us"]
    limit = POLL.total_seconds() + 0.5
    return {
        "schedule >= 5x faster than APScheduler": {
            "met": speedup >= 5,
            "value": f"{speedup:.2f}x",
        },
        "<= 0.1 round trips per fired item (batch 100)": {
            "met": ours["round_trips_per_fired"] <= 0.1,
            "value": ours["round_trips_per_fired"],
        },
        f"p99 lateness <= poll + 0.5 s = {limit:g} s": {
            "met": ours["p99_lateness_s"] <= limit,
            "value": f"{ours['p99_lateness_s']} s",
        },
        f"  the same at N={results['small']['n']} (server not saturated)": {
            "met": small["p99_lateness_s"] <= limit,
            "value": f"{small['p99_lateness_s']} s",
        },
    }


def main() -> int:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        print("FLOWSCHED_MONGO_URI is not set: run `make bench` (or tools/with-mongo.sh)")
        return 2
    probe: Any = MongoClient(uri)
    version = probe.server_info()["version"]
    host = "{}:{}".format(*probe.address)
    probe.close()
    results: dict[str, Any] = {"n": N, "server_version": version, "uri_host": host}
    results["server"] = server_insert_rate(uri)
    ours_us = flowsched_schedule(uri)
    theirs_us = apscheduler_schedule(uri, paused=False)
    paused_us = apscheduler_schedule(uri, paused=True)  # the firing runs add jobs paused
    results["apscheduler_paused_schedule_us"] = round(paused_us, 1)
    results["flowsched"] = {"schedule_us": round(ours_us, 1), **flowsched_firing(uri, N, ours_us)}
    results["apscheduler"] = {
        "schedule_us": round(theirs_us, 1),
        **apscheduler_firing(uri, N, paused_us),
    }
    # The same firing with a tenth of the items: what the schedulers do when the server's
    # write rate is not the limit.
    results["small"] = {
        "n": N // 10,
        "flowsched": flowsched_firing(uri, N // 10, ours_us),
        "apscheduler": apscheduler_firing(uri, N // 10, paused_us),
    }
    results["targets"] = targets(results)
    report(results)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
