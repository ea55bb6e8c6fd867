"""What MongoScheduler costs its users, against APScheduler 3's MongoDBJobStore, one server.

    bash tools/with-mongo.sh .venv/bin/python bench/mongo_bench.py     (or: make bench)

Every figure is the median of 3 runs (not the best), measured in one run on the same server
(``FLOWSCHED_MONGO_URI``), each scheduler in a database of its own (``fs_bench_*``) that
already holds stored timers due in an hour:

* ``schedule()`` (APScheduler: ``add_job`` on a running scheduler) per call, with 2,000 and
  with 10,000 timers stored, on a running node (its sweeper polls meanwhile);
* idle server time: CPU seconds the server process spends per wall second while one
  started node idles (nothing due), with 2,000 and 10,000 stored (read from /proc: only when
  the server runs on this machine), next to the same with no node running (the baseline:
  other clients of a shared server);
* 2,000 timers due within 1 s on one node (1 s poll, batches of 100, 8 workers): fired per
  second (from the first due time to the last handler start), p50/p99 lateness (handler
  start minus due), lost and duplicated deliveries, server round trips per fired timer
  (pymongo command monitoring, change stream included); flowsched's runs and APScheduler's
  take turns, each in its own database;
* cross-node wake-up: 30 timers, each scheduled by one node due 300 ms later, fired by
  another whose poll interval is 5 s: lateness p50/p99 (APScheduler 3 has no equivalent:
  a job another process adds waits for the scheduler's next wake-up).

Prints a table and writes ``bench/results/mongo.json``. Takes about 4-6 minutes.
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

RUNS = 3
SIZES = (2000, 10000)
FIRE = 2000
WINDOW = timedelta(seconds=1)
POLL = timedelta(seconds=1)
BATCH = 100
WORKERS = 8
SCHEDULE_CALLS = 300  # schedule() calls per run
APS_SCHEDULE_CALLS = 60  # add_job on a running APScheduler costs tens of ms each
IDLE_SECONDS = 4.0
CROSS_TIMERS = 30
CROSS_POLL = timedelta(seconds=5)
CROSS_LEAD = timedelta(milliseconds=300)
RESULTS = Path(__file__).with_name("results") / "mongo.json"

if os.environ.get("FLOWSCHED_BENCH_QUICK"):  # a smoke run of every step: minutes to seconds
    RUNS, SIZES, SCHEDULE_CALLS, APS_SCHEDULE_CALLS = 1, (200, 1000), 50, 10
    FIRE = int(os.environ.get("FLOWSCHED_BENCH_FIRE", 200))
    IDLE_SECONDS, CROSS_TIMERS = 1.0, 5
    RESULTS = RESULTS.with_name("mongo-quick.json")


UNCOUNTED = "flowsched-bench: the bench's own poll"
"""The ``comment`` of the bench's own commands (its polls for "every timer settled"): the
listener leaves them out, so a contender's round trips are only what it sent."""


def settled(collection: Any) -> bool:
    """Whether every ``fire-*`` document is gone (read with the UNCOUNTED comment)."""
    left: int = collection.count_documents({"_id": {"$regex": "^fire-"}}, comment=UNCOUNTED)
    return left == 0


class Commands(monitoring.CommandListener):
    """Counts commands (= server round trips) sent through one client, but the bench's own."""

    def __init__(self) -> None:
        self.count = 0
        self.by_name: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self._lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command.get("comment") == UNCOUNTED:
            return
        with self._lock:
            self.count += 1
            self.by_name[event.command_name] = self.by_name.get(event.command_name, 0) + 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> int:
        with self._lock:
            count, self.count = self.count, 0
            self.last, self.by_name = self.by_name, {}
        return count


class Firings:
    """Lateness of every delivery by id; ``done`` is set once ``expected`` ids have fired."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.late: dict[str, float] = {}
        self.deliveries = 0
        self.last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def record(self, item_id: str, due: datetime) -> None:
        now = datetime.now(UTC)
        with self._lock:
            self.deliveries += 1
            self.late.setdefault(item_id, (now - due).total_seconds())
            self.last = time.time()
            if len(self.late) >= self.expected:
                self.done.set()

    def summary(self, first_due: datetime, round_trips: int) -> dict[str, float]:
        late = sorted(self.late.values())
        span = self.last - first_due.timestamp()
        return {
            "fired": len(late),
            "lost": self.expected - len(late),
            "duplicates": self.deliveries - len(late),
            "p50_lateness_s": round(statistics.median(late), 3),
            "p99_lateness_s": round(percentile(late, 0.99), 3),
            "fired_per_s": round(len(late) / span, 1),
            "round_trips_per_fired": round(round_trips / len(late), 4),
        }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * q + 0.5) - 1))]


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the runs (figure by figure), and the runs themselves."""
    merged: dict[str, Any] = {
        key: round(statistics.median(run[key] for run in runs), 4) for key in runs[0]
    }
    merged["runs"] = runs
    return merged


# APScheduler stores a textual reference to its job function: the job records into the
# Firings of the run in progress.
CURRENT: list[Firings] = []


def apscheduler_job(job_id: str, due: datetime) -> None:
    CURRENT[-1].record(job_id, due)


def noop_job() -> None:
    pass


@contextmanager
def database(uri: str, commands: Commands | None = None) -> Iterator[Any]:
    """A fresh ``fs_bench_*`` database on a client of its own (monitored), dropped after.

    APScheduler closes its job store's client on shutdown: cleanup uses another client."""
    listeners = [commands] if commands else []
    client: Any = MongoClient(uri, tz_aware=True, event_listeners=listeners)
    name = f"fs_bench_{uuid.uuid4().hex[:8]}"
    try:
        yield client[name]
    finally:
        client.close()
        cleanup: MongoClient[Any]
        with MongoClient(uri) as cleanup:
            cleanup.drop_database(name)


def per_call_us(count: int, action: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for n in range(count):
        action(n)
    return (time.perf_counter() - start) / count * 1e6


def lead_for(action: Callable[[int], object]) -> timedelta:
    """Time to schedule FIRE items, twice over, plus a second: the first due time's distance
    (from the median of 20 calls: one slow call on a busy machine must not set it)."""
    times = []
    for n in range(20):
        start = time.perf_counter()
        action(n)
        times.append(time.perf_counter() - start)
    return timedelta(seconds=statistics.median(times) * FIRE * 2 + 1)


def due_times(count: int, lead: timedelta) -> list[datetime]:
    first = datetime.now(UTC) + lead
    return [first + WINDOW * n / count for n in range(count)]


def wait_for(condition: Callable[[], bool], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark did not finish in time")
        time.sleep(0.05)


# -- the server process's CPU -------------------------------------------------------------


def server_pid(port: int) -> int | None:
    """The local server's pid: the pid file of tools/start-mongo.sh, else a process whose
    command line names the port; None when the server is not on this machine."""
    pidfile = Path(os.environ.get("MONGO_HOME", "/tmp/flowsched-mongo")) / "server.pid"
    try:
        pid = int(pidfile.read_text().strip())
        if Path(f"/proc/{pid}").exists():
            return pid
    except (OSError, ValueError):
        pass
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if ("mongod" in cmdline or "secantus" in cmdline) and str(port) in cmdline:
            return int(proc.name)
    return None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_busy(pid: int | None, seconds: float) -> float | None:
    """Server CPU seconds per wall second over ``seconds``."""
    if pid is None:
        return None
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return round((cpu_seconds(pid) - before) / (time.monotonic() - start), 4)


# -- flowsched ----------------------------------------------------------------------------


def recorder(firings: Firings) -> Callable[[ScheduleItem, int], None]:
    """A timer handler that records each delivery in ``firings``."""
    return lambda item, attempt: firings.record(item.id, item.due)


def scheduling(node: MongoScheduler, ids: str) -> Callable[[int], object]:
    """Schedule the ``n``-th new timer ``<ids>-<n>`` (an hour ahead) on ``node``."""
    return lambda n: node.schedule(ScheduleItem(f"{ids}-{n}", ScheduleKind.TIMER, later()))


def scheduling_again(node: MongoScheduler, item: ScheduleItem) -> Callable[[int], object]:
    """Schedule ``item`` on ``node`` once more (a replace: the same id each call)."""
    return lambda n: node.schedule(item)


def adding_jobs(scheduler: Any, ids: str) -> Callable[[int], object]:
    """Add the ``n``-th new APScheduler job ``<ids>-<n>`` (an hour ahead)."""
    return lambda n: scheduler.add_job(noop_job, "date", run_date=later(), id=f"{ids}-{n}")


def later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


def store_timers(scheduler: MongoScheduler, start: int, stop: int) -> None:
    due = later()
    for n in range(start, stop):
        scheduler.schedule(ScheduleItem(f"stored-{n}", ScheduleKind.TIMER, due))


def flowsched_costs(uri: str, pid: int | None) -> dict[str, Any]:
    """schedule() and idle server time at each size, on one database that grows."""
    out: dict[str, Any] = {}
    with database(uri) as db:
        filler = MongoScheduler(db["timers"])  # never started: it only writes
        stored = 0
        for size in SIZES:
            store_timers(filler, stored, size)
            stored = size
            node = MongoScheduler(db["timers"], poll_interval=POLL)
            node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
            with node:  # running, as in production: its sweeper polls meanwhile
                time.sleep(0.5)
                runs = []
                for run in range(RUNS):
                    ids = f"new-{size}-{run}"
                    runs.append(
                        per_call_us(
                            SCHEDULE_CALLS,
                            scheduling(node, ids),
                        )
                    )
                    for n in range(SCHEDULE_CALLS):  # keep the stored count at ``size``
                        node.cancel(f"{ids}-{n}")
                time.sleep(POLL.total_seconds())
                idle = [server_busy(pid, IDLE_SECONDS) for _ in range(RUNS)]
            out[str(size)] = {
                "schedule_us": round(statistics.median(runs), 1),
                "schedule_us_runs": [round(r, 1) for r in runs],
                "idle_server_cpu": _median_or_none(idle),
                "idle_server_cpu_runs": idle,
            }
    return out


def _median_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 4) if known else None


class FlowschedFiring:
    """flowsched's firing runs: a database holding 10,000 stored timers, a fresh node per
    run firing FIRE timers due within 1 s."""

    name = "flowsched"

    def __init__(self, db: Any, commands: Commands) -> None:
        self.db, self.commands = db, commands
        store_timers(MongoScheduler(db["timers"]), 0, SIZES[-1])

    def run(self, run: int) -> dict[str, Any]:
        db, commands = self.db, self.commands
        firings = Firings(FIRE)
        node = MongoScheduler(db["timers"], poll_interval=POLL, batch_size=BATCH, workers=WORKERS)
        node.subscribe(ScheduleKind.TIMER, recorder(firings))
        with node:
            probe = ScheduleItem("probe", ScheduleKind.TIMER, later())
            lead = lead_for(scheduling_again(node, probe))
            dues = due_times(FIRE, lead)
            for n, due in enumerate(dues):
                node.schedule(ScheduleItem(f"fire-{run}-{n}", ScheduleKind.TIMER, due))
            commands.take()
            if not firings.done.wait(300):
                raise TimeoutError("flowsched did not fire every timer")
            wait_for(lambda: settled(db["timers"]))
            round_trips = commands.take()
        return firings.summary(dues[0], round_trips)

    def close(self) -> None:
        pass


def firing(uri: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """FIRE due within 1 s, RUNS runs of each contender, taking turns (the first of each
    pair alternates): the server slows as it ages, and a peer whose runs all came after
    ours would pay for that alone. Medians of flowsched's and APScheduler's runs."""
    fs_commands, aps_commands = Commands(), Commands()
    with database(uri, fs_commands) as fs_db, database(uri, aps_commands) as aps_db:
        contenders: list[FlowschedFiring | ApschedulerFiring] = [
            FlowschedFiring(fs_db, fs_commands),
            ApschedulerFiring(aps_db, aps_commands),
        ]
        runs: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders}
        try:
            for run in range(RUNS):
                for contender in contenders if run % 2 == 0 else contenders[::-1]:
                    runs[contender.name].append(contender.run(run))
                    print(
                        f"  {contender.name} firing run {run}: {runs[contender.name][-1]}",
                        file=sys.stderr,
                    )
        finally:
            for contender in contenders:
                contender.close()
    return median_of(runs["flowsched"]), median_of(runs["apscheduler"])


def cross_node(uri: str) -> dict[str, Any]:
    """One node schedules, another (5 s poll) fires: lateness of 30 timers due 300 ms on."""
    runs = []
    with database(uri) as db:
        store_timers(MongoScheduler(db["timers"]), 0, SIZES[-1])
        for run in range(RUNS):
            firings = Firings(CROSS_TIMERS)
            writer = MongoScheduler(db["timers"], node_id="writer")
            sweeper = MongoScheduler(db["timers"], node_id="sweeper", poll_interval=CROSS_POLL)
            sweeper.subscribe(ScheduleKind.TIMER, recorder(firings))
            with sweeper:
                time.sleep(1.0)  # its first poll is behind it
                for n in range(CROSS_TIMERS):
                    due = datetime.now(UTC) + CROSS_LEAD
                    writer.schedule(ScheduleItem(f"cross-{run}-{n}", ScheduleKind.TIMER, due))
                    time.sleep(0.15)
                if not firings.done.wait(60):
                    raise TimeoutError("cross-node timers did not all fire")
            late = list(firings.late.values())
            runs.append(
                {
                    "p50_lateness_s": round(statistics.median(late), 3),
                    "p99_lateness_s": round(percentile(late, 0.99), 3),
                    "lost": CROSS_TIMERS - len(late),
                    "duplicates": firings.deliveries - len(late),
                }
            )
    return median_of(runs)


# -- APScheduler 3 ------------------------------------------------------------------------


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


def add_stored_jobs(scheduler: Any, start: int, stop: int) -> None:
    due = later()
    for n in range(start, stop):
        scheduler.add_job(noop_job, "date", run_date=due, id=f"stored-{n}")


def apscheduler_costs(uri: str, pid: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with database(uri) as db:
        scheduler = apscheduler(db)
        scheduler.start(paused=True)  # paused: fills at the job store's insert cost
        try:
            stored = 0
            for size in SIZES:
                add_stored_jobs(scheduler, stored, size)
                stored = size
                scheduler.resume()
                runs = []
                for run in range(RUNS):
                    ids = f"new-{size}-{run}"
                    runs.append(
                        per_call_us(
                            APS_SCHEDULE_CALLS,
                            adding_jobs(scheduler, ids),
                        )
                    )
                    for n in range(APS_SCHEDULE_CALLS):
                        scheduler.remove_job(f"{ids}-{n}")
                time.sleep(0.5)
                idle = [server_busy(pid, IDLE_SECONDS) for _ in range(RUNS)]
                scheduler.pause()
                out[str(size)] = {
                    "schedule_us": round(statistics.median(runs), 1),
                    "schedule_us_runs": [round(r, 1) for r in runs],
                    "idle_server_cpu": _median_or_none(idle),
                    "idle_server_cpu_runs": idle,
                }
        finally:
            scheduler.shutdown(wait=False)
    return out


class ApschedulerFiring:
    """APScheduler 3's firing runs: a database holding 10,000 stored jobs, one scheduler
    (paused between runs) firing FIRE jobs due within 1 s each run."""

    name = "apscheduler"

    def __init__(self, db: Any, commands: Commands) -> None:
        self.db, self.commands = db, commands
        self.scheduler = apscheduler(db)
        self.scheduler.start(paused=True)
        add_stored_jobs(self.scheduler, 0, SIZES[-1])

    def run(self, run: int) -> dict[str, Any]:
        scheduler, commands = self.scheduler, self.commands
        firings = Firings(FIRE)
        CURRENT.append(firings)
        lead = lead_for(adding_jobs(scheduler, f"probe-{run}"))
        dues = due_times(FIRE, lead)
        for n, due in enumerate(dues):
            job_id = f"fire-{run}-{n}"
            scheduler.add_job(apscheduler_job, "date", run_date=due, args=[job_id, due], id=job_id)
        commands.take()
        scheduler.resume()
        if not firings.done.wait(300):
            raise TimeoutError("APScheduler did not fire every job")
        wait_for(lambda: settled(self.db["jobs"]))
        round_trips = commands.take()
        scheduler.pause()
        return firings.summary(dues[0], round_trips)

    def close(self) -> None:
        self.scheduler.shutdown(wait=True)


# -- report -------------------------------------------------------------------------------


def report(results: dict[str, Any]) -> None:
    ours, theirs = results["flowsched"], results["apscheduler"]
    small, big = (str(s) for s in SIZES)
    print(f"\nMongoDB scheduler benchmark: medians of {RUNS} runs, one server, one run")
    print(f"server: {results['server_version']} at {results['uri_host']}")
    print(f"server CPU with no node of ours running (baseline): {results['baseline_cpu']}\n")
    print(f"{'metric':46} {'flowsched':>12} {'APScheduler':>12}")
    rows: list[tuple[str, Any, Any]] = []
    for size in (small, big):
        rows.append(
            (
                f"schedule, us per call ({size} stored)",
                ours["costs"][size]["schedule_us"],
                theirs["costs"][size]["schedule_us"],
            )
        )
    for size in (small, big):
        rows.append(
            (
                f"idle server CPU s/s ({size} stored)",
                ours["costs"][size]["idle_server_cpu"],
                theirs["costs"][size]["idle_server_cpu"],
            )
        )
    for key, label in (
        ("fired_per_s", "fired per second"),
        ("p50_lateness_s", "p50 lateness, s"),
        ("p99_lateness_s", "p99 lateness, s"),
        ("lost", "lost"),
        ("duplicates", "duplicates"),
        ("round_trips_per_fired", "round trips per fired timer"),
    ):
        rows.append((f"{label} ({FIRE} due in 1 s)", ours["firing"][key], theirs["firing"][key]))
    cross = ours["cross_node"]
    rows.append(("cross-node wake-up p50, s (5 s poll)", cross["p50_lateness_s"], "n/a"))
    rows.append(("cross-node wake-up p99, s (5 s poll)", cross["p99_lateness_s"], "n/a"))
    for label, a, b in rows:
        print(f"{label:46} {a!s:>12} {b!s:>12}")
    print("\ntargets:")
    for name, verdict in results["targets"].items():
        print(f"  {name:58} {'met' if verdict['met'] else 'NOT met'} ({verdict['value']})")


def targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    ours, theirs = results["flowsched"], results["apscheduler"]
    small, big = (ours["costs"][str(s)] for s in SIZES)
    firing, cross = ours["firing"], ours["cross_node"]
    ratio = big["schedule_us"] / small["schedule_us"]
    verdicts: dict[str, dict[str, Any]] = {
        "schedule() at 10k stored <= 1.5x at 2k": {"met": ratio <= 1.5, "value": f"{ratio:.2f}x"},
    }
    if small["idle_server_cpu"] is not None and big["idle_server_cpu"] is not None:
        # Against the baseline's noise floor: a node whose idle cost is below it is flat.
        floor = max(results["baseline_cpu"] or 0.0, 0.005)
        idle = max(big["idle_server_cpu"], floor) / max(small["idle_server_cpu"], floor)
        verdicts["idle server time at 10k <= 1.5x at 2k"] = {
            "met": idle <= 1.5,
            "value": f"{idle:.2f}x",
        }
    speed = firing["fired_per_s"] / theirs["firing"]["fired_per_s"]
    verdicts |= {
        "fired/s >= 1.0x APScheduler's MongoDBJobStore": {
            "met": speed >= 1.0,
            "value": f"{speed:.2f}x",
        },
        "p99 lateness <= 2 s (2,000 due in 1 s)": {
            "met": firing["p99_lateness_s"] <= 2.0,
            "value": f"{firing['p99_lateness_s']} s",
        },
        "0 lost, 0 duplicates": {
            "met": firing["lost"] == 0 and firing["duplicates"] == 0,
            "value": f"{firing['lost']} lost, {firing['duplicates']} duplicates",
        },
        "round trips per fired timer <= 0.1": {
            "met": firing["round_trips_per_fired"] <= 0.1,
            "value": firing["round_trips_per_fired"],
        },
        "cross-node wake-up p99 <= 150 ms (5 s poll, 30 timers)": {
            "met": cross["p99_lateness_s"] <= 0.150,
            "value": f"{cross['p99_lateness_s'] * 1000:.0f} ms",
        },
    }
    return verdicts


def main() -> int:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        print("FLOWSCHED_MONGO_URI is not set: run `make bench` (or tools/with-mongo.sh)")
        return 2
    probe: Any = MongoClient(uri)
    version = probe.server_info()["version"]
    host, port = probe.address
    probe.close()
    pid = server_pid(port) if host in ("127.0.0.1", "localhost", "::1") else None
    started = time.monotonic()
    results: dict[str, Any] = {
        "runs": RUNS,
        "server_version": version,
        "uri_host": f"{host}:{port}",
        "baseline_cpu": _median_or_none([server_busy(pid, IDLE_SECONDS) for _ in range(RUNS)]),
    }
    # Each step gives its figures per contender (the firing runs: both, taking turns).
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("costs", lambda: {"flowsched": flowsched_costs(uri, pid)}),
        ("costs", lambda: {"apscheduler": apscheduler_costs(uri, pid)}),
        ("firing", lambda: dict(zip(("flowsched", "apscheduler"), firing(uri), strict=True))),
        ("cross_node", lambda: {"flowsched": cross_node(uri)}),
    ]
    for what, step in steps:
        began = time.monotonic()
        figures = step()
        for who, figure in figures.items():
            results.setdefault(who, {})[what] = figure
        print(f"{'/'.join(figures)} {what}: {time.monotonic() - began:.0f} s", file=sys.stderr)
    results["seconds"] = round(time.monotonic() - started)
    results["targets"] = targets(results)
    report(results)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS} ({results['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
