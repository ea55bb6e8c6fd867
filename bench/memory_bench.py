"""InMemoryScheduler against APScheduler 3.11, side by side in one run, on the same N.

    .venv/bin/python bench/memory_bench.py          # the full run (make bench), ~2 minutes
    .venv/bin/python bench/memory_bench.py --quick  # smaller N, a smoke run

APScheduler is configured as its docs suggest for in-process timers: ``BackgroundScheduler``
with a ``MemoryJobStore``, a thread pool of the same size as ours (8), one-shot ``date`` jobs,
``misfire_grace_time=None`` (so late jobs still run and their lateness is measured instead of
being skipped). Both run in this process, one after the other, with the garbage collector on.

Figures (printed as a table, written to ``bench/results/memory.json``):

* schedule cost per timer, N = 50,000, both schedulers started, timers due in an hour: what
  a caller pays, ``schedule(ScheduleItem(id, kind, due))`` against ``add_job(...)`` (ids and
  due times built beforehand, fresh ones in each process), the garbage collector on. Each in
  3 fresh processes, alternating; the figure is the median. Also measured with the collector
  paused, to show its share. Due times one after the other are APScheduler's best case: its
  job store is a sorted list, and each job is appended at its end.
* the same cost with many timers held: 1,000,000 timers due within the next hour are
  scheduled first (not timed), then 20,000 with mixed delays (random instants of that hour)
  are timed: a list insert in the middle for APScheduler, a heap push for us. 3 fresh
  processes each (filling APScheduler takes ~25 s per process).
* in both cases, a *floor* measured the same way: not a scheduler, the least any Python one
  pays per timer (a slotted object built, a lock, a dict entry, a heap push), so that a
  ratio against APScheduler can be read against what the language allows here.
* lateness (fire time - due time, measured in the handler with ``time.time()``) of 50,000
  timers due within 1 s, and of 10,000 timers spread over 2 s; due times shuffled; each run
  three times per scheduler, the run with the median p99 reported (all runs are in the JSON):
  the CPU of this shared two-core VM sometimes slows down ten-fold for tens of ms.
* fire rate (deliveries per second of a burst of 50,000 timers due at one instant) with
  1,000,000 vs 10,000 other timers pending: two schedulers, bursts alternating between them
  (so both see the same machine conditions), a warm-up round then 5 counted ones; the figure
  is the median of the five paired ratios (the best rates are shown too); it shows what the
  size of the heap costs.
  APScheduler at 100,000 pending (bursts of 10,000): at 1,000,000 its list-based job store
  (an O(n) insert per job) would take many minutes to fill.
* memory per pending timer at 1,000,000: RSS delta (``/proc/self/statm``) around scheduling
  them, in a fresh interpreter (so that no freed memory is reused), after a full collection:
  everything a timer keeps alive (item, id string, due datetime, heap and map entries). Also
  tracemalloc's count at 100,000 (tracemalloc at 1,000,000 takes ~40 s).
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apscheduler
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from report import print_table

from flowsched import InMemoryScheduler, ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER
WORKERS = 8
RESULTS = Path(__file__).parent / "results" / "memory.json"


# -- helpers ------------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest rank."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


class Sink:
    """Records the lateness of ``expected`` deliveries; ``done`` is set at the last one."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.lateness: list[float] = []
        self.done = threading.Event()
        self.last_at = 0.0
        self._lock = threading.Lock()

    def record(self, due_ts: float) -> None:
        now = time.time()
        with self._lock:
            self.lateness.append(now - due_ts)
            if len(self.lateness) == self.expected:
                self.last_at = now
                self.done.set()

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.lateness)
        if not ordered:
            return {"delivered": 0}
        return {
            "delivered": len(ordered),
            "p50_ms": percentile(ordered, 0.50) * 1e3,
            "p99_ms": percentile(ordered, 0.99) * 1e3,
            "max_ms": ordered[-1] * 1e3,
        }


class Flowsched:
    """flowsched.InMemoryScheduler, started, one handler for every timer."""

    name = "flowsched"

    def __init__(self) -> None:
        self.sink = Sink(0)
        self.scheduler = InMemoryScheduler(workers=WORKERS)
        self.scheduler.subscribe(TIMER, self._deliver)
        self.scheduler.start()

    def _deliver(self, item: ScheduleItem, attempt: int) -> None:
        self.sink.record(item.due.timestamp())

    def add(self, timer_id: str, when: datetime, due_ts: float) -> None:
        self.scheduler.schedule(ScheduleItem(timer_id, TIMER, when))

    def close(self) -> None:
        self.scheduler.close()


class APScheduler:
    """APScheduler 3.11: BackgroundScheduler + MemoryJobStore, one-shot date jobs."""

    name = "APScheduler"

    def __init__(self) -> None:
        self.sink = Sink(0)
        self.scheduler = BackgroundScheduler(
            jobstores={"default": MemoryJobStore()},
            executors={"default": ThreadPoolExecutor(WORKERS)},
            job_defaults={"misfire_grace_time": None, "coalesce": False},
            timezone=UTC,
        )
        self.scheduler.start()

    def _deliver(self, due_ts: float) -> None:
        self.sink.record(due_ts)

    def add(self, timer_id: str, when: datetime, due_ts: float) -> None:
        self.scheduler.add_job(self._deliver, "date", run_date=when, args=(due_ts,), id=timer_id)

    def close(self) -> None:
        self.scheduler.shutdown(wait=False)


class Floor:
    """Not a scheduler: the least any Python one pays per timer - a slotted object built, a
    lock taken, a dict entry and a heap push. Measured beside the two so that a ratio can be
    read against what the language allows on this machine."""

    name = "floor"

    class Timer:
        __slots__ = ("due", "id", "kind")

        def __init__(self, timer_id: str, kind: ScheduleKind, due: datetime) -> None:
            self.id = timer_id
            self.kind = kind
            self.due = due

    def __init__(self) -> None:
        self.items: dict[str, Floor.Timer] = {}
        self.heap: list[tuple[datetime, str]] = []
        self.lock = threading.Lock()

    def add(self, timer_id: str, when: datetime, due_ts: float) -> None:
        timer = Floor.Timer(timer_id, TIMER, when)
        with self.lock:
            self.items[timer_id] = timer
            heapq.heappush(self.heap, (when, timer_id))

    def close(self) -> None:
        pass


Contender = Flowsched | APScheduler


# -- 1. schedule cost (in fresh interpreters) ----------------------------------------------


def schedule_cost_here(name: str, n: int, pending: int, collector: bool) -> float:
    """Seconds per timer for what a caller pays: building the ``ScheduleItem`` and calling
    ``schedule()`` (flowsched), or calling ``add_job()`` (APScheduler), on a started
    scheduler, with fresh ids and due times (built beforehand, as a caller has them), the
    garbage collector on (or paused, to show its share), in this (fresh) process.

    ``pending == 0``: ``n`` timers due one after the other (each later than the last, as
    timers of one fixed delay are). ``pending > 0``: first ``pending`` timers due within the
    next hour are scheduled (in due order, not timed), then the ``n`` timed ones have mixed
    delays, due at random instants of that hour - a scheduler holding many timers of
    different delays, the same for both contenders."""
    contender = {k.name: k for k in (Flowsched, APScheduler, Floor)}[name]()
    due = datetime.now(UTC) + timedelta(hours=1)
    if pending:
        rng = random.Random()  # fresh inputs in each process
        held = sorted(rng.uniform(0, 3600) for _ in range(pending))
        for i, offset in enumerate(held):
            when = due + timedelta(seconds=offset)
            contender.add(f"p-{i}", when, when.timestamp())
        dues = [due + timedelta(seconds=rng.uniform(0, 3600)) for _ in range(n)]
    else:
        dues = [due + timedelta(microseconds=i) for i in range(n)]
    ids = [f"t-{i}" for i in range(n)]
    gc.collect()
    if not collector:
        gc.disable()
    if isinstance(contender, Flowsched):
        schedule, item, kind = contender.scheduler.schedule, ScheduleItem, TIMER
        start = time.perf_counter()
        for timer_id, when in zip(ids, dues, strict=True):
            schedule(item(timer_id, kind, when))
    elif isinstance(contender, Floor):
        add = contender.add
        start = time.perf_counter()
        for timer_id, when in zip(ids, dues, strict=True):
            add(timer_id, when, 0.0)
    else:
        add_job, deliver = contender.scheduler.add_job, contender._deliver
        start = time.perf_counter()
        for timer_id, when in zip(ids, dues, strict=True):
            add_job(deliver, "date", run_date=when, args=(0.0,), id=timer_id)
    per_timer = (time.perf_counter() - start) / n
    gc.enable()
    contender.close()
    return per_timer


def schedule_cost(
    kind: type[Contender | Floor], n: int, pending: int = 0, collector: bool = True
) -> float:
    """:func:`schedule_cost_here` in a child interpreter (nothing cached from earlier runs)."""
    command = [sys.executable, __file__, "--schedule-cost", kind.name, str(n), str(pending)]
    if not collector:
        command.append("--collector-paused")
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return float(json.loads(out))


# -- 2. lateness --------------------------------------------------------------------------


def lead_time(n: int, add_cost: float) -> float:
    """Seconds to allow for adding ``n`` timers (plus building their arguments)."""
    return 0.5 + n * (1.5 * add_cost + 5e-6)


def lateness(kind: type[Contender], n: int, window: float, add_cost: float) -> dict[str, float]:
    """``n`` timers due uniformly within ``window`` seconds, scheduled in shuffled order,
    starting far enough ahead (from the measured add cost) that all are in before the first
    falls due."""
    contender = kind()
    contender.sink = Sink(n)
    lead = lead_time(n, add_cost)
    first = time.time() + lead
    dues = [first + window * i / n for i in range(n)]
    random.Random(42).shuffle(dues)
    for i, due in enumerate(dues):
        contender.add(f"t-{i}", datetime.fromtimestamp(due, UTC), due)
    in_time = time.time() < first
    contender.sink.done.wait(lead + window + 300)
    contender.close()
    return {**contender.sink.summary(), "all_scheduled_before_first_due": in_time}


# -- 3. fire rate with many pending ------------------------------------------------------


def fire_rates(
    kind: type[Contender], sizes: tuple[int, int], burst: int, rounds: int
) -> list[dict[str, Any]]:
    """Two schedulers, with ``sizes`` timers pending (due tomorrow); then, alternately, bursts
    of ``burst`` timers due at one instant: rate = burst / (last delivery - that instant).
    Alternating puts both sizes under the same machine conditions; a first round of bursts
    warms up and is not counted."""
    contenders = []
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    for pending in sizes:
        contender = kind()
        start = time.perf_counter()
        for i in range(pending):
            contender.add(f"p-{i}", tomorrow + timedelta(microseconds=i), 0.0)
        contenders.append((contender, (time.perf_counter() - start) / pending))
    # Start both from a clean collector state (building a million items leaves a full
    # collection pending), and discard a first warm-up round.
    gc.collect()
    rates: list[list[float | None]] = [[] for _ in sizes]
    for round_ in range(rounds + 1):
        for (contender, add_cost), out, pending in zip(contenders, rates, sizes, strict=True):
            contender.sink = Sink(burst)
            at = time.time() + lead_time(burst, add_cost)
            when = datetime.fromtimestamp(at, UTC)
            for i in range(burst):
                contender.add(f"b{round_}-{i}", when, at)
            in_time = time.time() < at
            contender.sink.done.wait(300)
            if round_ == 0:
                continue
            if in_time:
                out.append(burst / (contender.sink.last_at - at))
            else:
                # The machine stalled while the burst was being scheduled: the rate would
                # measure the stall, not the scheduler. Keep the round's place (pairs stay
                # aligned) but do not count it.
                out.append(None)
                print(f"    (a burst with {pending:,} pending was late: not counted)", flush=True)
    for contender, _ in contenders:
        contender.close()
    return [
        {
            "pending": pending,
            "burst": burst,
            "rates_per_s": r,
            "best_rate_per_s": max((x for x in r if x is not None), default=0.0),
        }
        for pending, r in zip(sizes, rates, strict=True)
    ]


# -- 4. memory per pending timer (in a fresh interpreter) ---------------------------------


def memory_here(kind: type[Contender], pending: int, traced: bool) -> dict[str, float]:
    """Bytes per pending timer in this (fresh) process: RSS delta, or tracemalloc's count."""
    if traced:
        tracemalloc.start()
    gc.collect()
    rss_before = rss_bytes()
    traced_before = tracemalloc.get_traced_memory()[0] if traced else 0
    contender = kind()
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    for i in range(pending):
        contender.add(f"p-{i:07d}", tomorrow + timedelta(microseconds=i), 0.0)
    gc.collect()
    result = {"pending": pending, "rss_bytes_per_timer": (rss_bytes() - rss_before) / pending}
    if traced:
        result["tracemalloc_bytes_per_timer"] = (
            tracemalloc.get_traced_memory()[0] - traced_before
        ) / pending
    contender.close()
    return result


def memory(kind: type[Contender], pending: int, traced: bool = False) -> dict[str, float]:
    """Run :func:`memory_here` in a child interpreter, so that no memory freed by earlier
    measurements is reused (which would make an RSS delta too small)."""
    command = [sys.executable, __file__, "--memory", kind.name, str(pending)]
    if traced:
        command.append("--traced")
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


# -- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    schedule_n: int
    loaded_n: int
    loaded_pending: int
    burst_n: int
    burst_window: float
    spread_n: int
    spread_window: float
    pending_small: int
    pending_large: int
    fire_burst: int
    aps_pending_large: int
    aps_fire_burst: int
    traced_n: int
    runs: int


FULL = Sizes(
    schedule_n=50_000,
    loaded_n=20_000,
    loaded_pending=1_000_000,
    burst_n=50_000,
    burst_window=1.0,
    spread_n=10_000,
    spread_window=2.0,
    pending_small=10_000,
    pending_large=1_000_000,
    fire_burst=50_000,
    aps_pending_large=100_000,
    aps_fire_burst=10_000,
    traced_n=100_000,
    runs=3,
)
QUICK = Sizes(
    10_000,
    5_000,
    100_000,
    10_000,
    1.0,
    2_000,
    2.0,
    10_000,
    100_000,
    20_000,
    20_000,
    2_000,
    20_000,
    1,
)


def step(text: str) -> None:
    print(f"  {text} ...", file=sys.stderr, flush=True)


def run(sizes: Sizes) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    step(f"schedule cost, N={sizes.schedule_n:,}, {sizes.runs} fresh process(es) each")
    ours: list[float] = []
    aps: list[float] = []
    floor: list[float] = []
    for _ in range(sizes.runs):  # alternating: both see the same machine conditions
        ours.append(schedule_cost(Flowsched, sizes.schedule_n))
        aps.append(schedule_cost(APScheduler, sizes.schedule_n))
        floor.append(schedule_cost(Floor, sizes.schedule_n))
    paused = [
        schedule_cost(Flowsched, sizes.schedule_n, collector=False) for _ in range(sizes.runs)
    ]
    raw["schedule_cost_us"] = {
        "flowsched": [c * 1e6 for c in ours],
        "APScheduler": [c * 1e6 for c in aps],
        "flowsched_collector_paused": [c * 1e6 for c in paused],
        "floor": [c * 1e6 for c in floor],
    }
    step(
        f"schedule cost, {sizes.loaded_n:,} with mixed delays onto {sizes.loaded_pending:,} "
        f"pending, {sizes.runs} fresh process(es) each"
    )
    loaded: dict[str, list[float]] = {"flowsched": [], "APScheduler": [], "floor": []}
    for _ in range(sizes.runs):
        for kind in (Flowsched, APScheduler, Floor):
            cost_s = schedule_cost(kind, sizes.loaded_n, sizes.loaded_pending)
            loaded[kind.name].append(cost_s * 1e6)
    raw["schedule_cost_loaded_us"] = {
        "n": sizes.loaded_n,
        "pending": sizes.loaded_pending,
        **loaded,
    }
    cost = {Flowsched: statistics.median(ours), APScheduler: statistics.median(aps)}

    for label, n, window in (
        ("burst", sizes.burst_n, sizes.burst_window),
        ("spread", sizes.spread_n, sizes.spread_window),
    ):
        step(f"lateness, {n:,} timers within {window:g} s, {sizes.runs} run(s) each")
        raw[f"lateness_{label}"] = {"n": n, "window_s": window}
        for kind in (Flowsched, APScheduler):
            runs = [lateness(kind, n, window, cost[kind]) for _ in range(sizes.runs)]
            raw[f"lateness_{label}"][kind.name] = runs

    step(f"fire rate with {sizes.pending_small:,} / {sizes.pending_large:,} pending (flowsched)")
    raw["fire_rate_flowsched"] = fire_rates(
        Flowsched, (sizes.pending_small, sizes.pending_large), sizes.fire_burst, rounds=5
    )
    step(f"fire rate with {sizes.pending_small:,} / {sizes.aps_pending_large:,} (APScheduler)")
    raw["fire_rate_APScheduler"] = fire_rates(
        APScheduler, (sizes.pending_small, sizes.aps_pending_large), sizes.aps_fire_burst, 2
    )

    step(f"memory per pending timer, fresh interpreters ({sizes.pending_large:,} pending)")
    raw["memory"] = {
        "flowsched": memory(Flowsched, sizes.pending_large),
        "flowsched_traced": memory(Flowsched, sizes.traced_n, traced=True),
        "APScheduler": memory(APScheduler, sizes.aps_pending_large),
    }
    return raw


def median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median p99 (what a user typically sees, not the luckiest run)."""
    return sorted(runs, key=lambda r: r["p99_ms"])[len(runs) // 2]


def paired_ratio(small: dict[str, Any], large: dict[str, Any]) -> float:
    """Median over rounds of (rate with many pending / rate with few): each pair of bursts
    ran back to back, under the same machine conditions."""
    pairs = zip(large["rates_per_s"], small["rates_per_s"], strict=True)
    return float(statistics.median(big / few for big, few in pairs if big and few))


def figures(raw: dict[str, Any], sizes: Sizes) -> list[dict[str, Any]]:
    """The issue's table: one row per figure, flowsched and APScheduler side by side."""
    ours_cost = statistics.median(raw["schedule_cost_us"]["flowsched"])
    aps_cost = statistics.median(raw["schedule_cost_us"]["APScheduler"])
    paused = statistics.median(raw["schedule_cost_us"]["flowsched_collector_paused"])
    speedup = aps_cost / ours_cost
    loaded = raw["schedule_cost_loaded_us"]
    ours_loaded = statistics.median(loaded["flowsched"])
    aps_loaded = statistics.median(loaded["APScheduler"])
    loaded_speedup = aps_loaded / ours_loaded
    floor_cost = statistics.median(raw["schedule_cost_us"]["floor"])
    floor_loaded = statistics.median(loaded["floor"])
    burst = {k: median_run(raw["lateness_burst"][k]) for k in ("flowsched", "APScheduler")}
    spread = {k: median_run(raw["lateness_spread"][k]) for k in ("flowsched", "APScheduler")}
    small, large = raw["fire_rate_flowsched"]
    aps_small, aps_large = raw["fire_rate_APScheduler"]
    ratio = paired_ratio(small, large)
    aps_ratio = paired_ratio(aps_small, aps_large)
    mem, aps_mem = raw["memory"]["flowsched"], raw["memory"]["APScheduler"]
    traced = raw["memory"]["flowsched_traced"]
    return [
        {
            "figure": f"schedule cost per timer incl. building the item, {sizes.schedule_n:,}"
            f" in due order, none pending (median of {len(raw['schedule_cost_us']['flowsched'])}"
            " processes)",
            "flowsched": f"{ours_cost:.2f} us",
            "APScheduler": f"{aps_cost:.1f} us",
            "target": "<= 2 us",
            "ok": ours_cost <= 2.0,
            "note": f"{speedup:.0f}x faster (APScheduler appends to its list here); "
            f"collector paused: {paused:.2f} us; floor {floor_cost:.2f} us = "
            f"{aps_cost / floor_cost:.0f}x APScheduler",
        },
        {
            "figure": f"schedule cost per timer incl. building the item, {loaded['n']:,} with "
            f"mixed delays onto {loaded['pending']:,} pending "
            f"(median of {len(loaded['flowsched'])} processes)",
            "flowsched": f"{ours_loaded:.2f} us",
            "APScheduler": f"{aps_loaded:.1f} us",
            "target": "<= 2 us, >= 40x faster",
            "ok": ours_loaded <= 2.0 and loaded_speedup >= 40,
            "note": f"{loaded_speedup:.0f}x faster (APScheduler: a list insert, O(n)); "
            f"floor {floor_loaded:.2f} us",
        },
        {
            "figure": f"{sizes.burst_n:,} timers due within {sizes.burst_window:g} s: p99 lateness",
            "flowsched": f"{burst['flowsched']['p99_ms']:.2f} ms",
            "APScheduler": f"{burst['APScheduler']['p99_ms']:.0f} ms",
            "target": "<= 20 ms",
            "ok": burst["flowsched"]["p99_ms"] <= 20,
            "note": f"max {burst['flowsched']['max_ms']:.1f} ms vs "
            f"{burst['APScheduler']['max_ms']:.0f} ms",
        },
        {
            "figure": f"{sizes.spread_n:,} timers spread over {sizes.spread_window:g} s: "
            "p99 lateness",
            "flowsched": f"{spread['flowsched']['p99_ms']:.2f} ms",
            "APScheduler": f"{spread['APScheduler']['p99_ms']:.1f} ms",
            "target": "<= 1 ms",
            "ok": spread["flowsched"]["p99_ms"] <= 1,
            "note": f"p50 {spread['flowsched']['p50_ms']:.2f} ms vs "
            f"{spread['APScheduler']['p50_ms']:.1f} ms",
        },
        {
            "figure": f"fire rate, {large['pending']:,} vs {small['pending']:,} pending "
            "(median of paired ratios; best rates)",
            "flowsched": f"{ratio:.2f} ({large['best_rate_per_s'] / 1e3:.0f}k/s vs "
            f"{small['best_rate_per_s'] / 1e3:.0f}k/s)",
            "APScheduler": f"{aps_ratio:.2f} at {aps_large['pending'] // 1000}k "
            f"({aps_large['best_rate_per_s'] / 1e3:.1f}k/s vs "
            f"{aps_small['best_rate_per_s'] / 1e3:.1f}k/s)",
            "target": "ratio >= 0.7",
            "ok": ratio >= 0.7,
            "note": f"bursts of {large['burst']:,} (APScheduler {aps_large['burst']:,})",
        },
        {
            "figure": f"memory per pending timer at {mem['pending']:,} (RSS delta)",
            "flowsched": f"{mem['rss_bytes_per_timer']:.0f} B",
            "APScheduler": f"{aps_mem['rss_bytes_per_timer']:.0f} B at "
            f"{aps_mem['pending'] // 1000}k",
            "target": "<= 500 B",
            "ok": mem["rss_bytes_per_timer"] <= 500,
            "note": f"tracemalloc at {traced['pending']:,}: "
            f"{traced['tracemalloc_bytes_per_timer']:.0f} B",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N: a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument("--memory", nargs=2, metavar=("CONTENDER", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--schedule-cost", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--collector-paused", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.schedule_cost:
        name, n, pending = args.schedule_cost
        cost = schedule_cost_here(name, int(n), int(pending), not args.collector_paused)
        print(json.dumps(cost))
        return
    if args.memory:
        kind = {k.name: k for k in (Flowsched, APScheduler)}[args.memory[0]]
        print(json.dumps(memory_here(kind, int(args.memory[1]), args.traced)))
        return
    sizes = QUICK if args.quick else FULL
    mode = " (quick)" if args.quick else ""
    print(
        f"memory_bench{mode}: flowsched vs APScheduler {apscheduler.__version__}", file=sys.stderr
    )
    started = time.perf_counter()
    raw = run(sizes)
    rows = figures(raw, sizes)
    elapsed = time.perf_counter() - started
    print_table(rows, "APScheduler")
    print(f"({elapsed:.0f} s; lateness: median of {sizes.runs} run(s); results in {args.out})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "apscheduler": apscheduler.__version__,
        "workers": WORKERS,
        "elapsed_s": round(elapsed, 1),
        "figures": rows,
        "raw": raw,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
