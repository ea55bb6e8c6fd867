"""InMemoryScheduler against APScheduler 3.11, side by side in one run, on the same N.

    .venv/bin/python bench/memory_bench.py          # the full run (make bench), ~2 minutes
    .venv/bin/python bench/memory_bench.py --quick  # smaller N, a smoke run

APScheduler is configured as its docs suggest for in-process timers: ``BackgroundScheduler``
with a ``MemoryJobStore``, a thread pool of the same size as ours (8), one-shot ``date`` jobs,
``misfire_grace_time=None`` (so late jobs still run and their lateness is measured instead of
being skipped). Both run in this process, one after the other, with the garbage collector on.

Figures (printed as a table, written to ``bench/results/memory.json``):

* schedule cost per timer, N = 50,000, both schedulers started, timers due in an hour. The
  items / arguments are built beforehand; the figure is the ``schedule()`` / ``add_job()``
  call alone. Best and median of several repeats (a shared machine is noisy).
* lateness (fire time - due time, measured in the handler with ``time.time()``) of 50,000
  timers due within 1 s, and of 10,000 timers spread over 2 s; due times shuffled.
* fire rate (deliveries per second of a burst due at one instant) with 1,000,000 vs 10,000
  other timers pending; the ratio shows how much the size of the heap costs.
* memory per pending timer at 1,000,000: RSS delta (``/proc/self/statm``) after a full
  collection, everything a timer keeps alive (item, id string, due datetime, heap and map).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import statistics
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from dataclasses import dataclass
from typing import Any

import apscheduler
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler

from flowsched import InMemoryScheduler, ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER
WORKERS = int(os.environ.get("WORKERS", "8"))
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


Contender = Flowsched | APScheduler


# -- 1. schedule cost ---------------------------------------------------------------------


def schedule_cost(kind: type[Contender], n: int, repeats: int) -> list[float]:
    """Seconds per schedule()/add_job() call (items or arguments built beforehand)."""
    due = datetime.now(UTC) + timedelta(hours=1)
    dues = [due + timedelta(microseconds=i) for i in range(n)]
    ids = [f"t-{i}" for i in range(n)]
    items = [ScheduleItem(i, TIMER, d) for i, d in zip(ids, dues, strict=True)]
    per_timer = []
    for _ in range(repeats):
        contender = kind()
        gc.collect()
        if isinstance(contender, Flowsched):
            schedule = contender.scheduler.schedule
            start = time.perf_counter()
            for item in items:
                schedule(item)
        else:
            add_job, deliver = contender.scheduler.add_job, contender._deliver
            start = time.perf_counter()
            for timer_id, run_date in zip(ids, dues, strict=True):
                add_job(deliver, "date", run_date=run_date, args=(0.0,), id=timer_id)
        per_timer.append((time.perf_counter() - start) / n)
        contender.close()
    return per_timer


# -- 2. lateness --------------------------------------------------------------------------


def lateness(kind: type[Contender], n: int, window: float, add_cost: float) -> dict[str, float]:
    """``n`` timers due uniformly within ``window`` seconds, scheduled in shuffled order,
    starting far enough ahead (from the measured add cost) that all are in before the first
    falls due."""
    contender = kind()
    contender.sink = Sink(n)
    lead = 0.3 + 3 * n * add_cost
    first = time.time() + lead
    dues = [first + window * i / n for i in range(n)]
    random.Random(42).shuffle(dues)
    for i, due in enumerate(dues):
        contender.add(f"t-{i}", datetime.fromtimestamp(due, UTC), due)
    in_time = time.time() < first
    contender.sink.done.wait(lead + window + 300)
    contender.close()
    return {**contender.sink.summary(), "all_scheduled_before_first_due": in_time}


# -- 3. fire rate with many pending, and memory -------------------------------------------


def fire_rate(kind: type[Contender], pending: int, burst: int, repeats: int) -> dict[str, Any]:
    """``pending`` timers due tomorrow, then bursts of ``burst`` timers all due at one instant:
    rate = burst / (last delivery - that instant). Also the RSS cost of the pending timers."""
    gc.collect()
    before = rss_bytes()
    contender = kind()
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    start = time.perf_counter()
    for i in range(pending):
        contender.add(f"p-{i}", tomorrow + timedelta(microseconds=i), 0.0)
    add_cost = (time.perf_counter() - start) / pending
    gc.collect()
    per_pending = (rss_bytes() - before) / pending
    rates = []
    for round_ in range(repeats):
        contender.sink = Sink(burst)
        at = time.time() + 0.3 + 3 * burst * add_cost
        when = datetime.fromtimestamp(at, UTC)
        for i in range(burst):
            contender.add(f"b{round_}-{i}", when, at)
        assert time.time() < at, "the burst was not scheduled before its due time"
        contender.sink.done.wait(300)
        rates.append(burst / (contender.sink.last_at - at))
    contender.close()
    return {
        "pending": pending,
        "burst": burst,
        "rates_per_s": rates,
        "median_rate_per_s": statistics.median(rates),
        "rss_bytes_per_pending": per_pending,
        "add_cost_us_at_this_size": add_cost * 1e6,
    }


# -- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    schedule_n: int
    burst_n: int
    burst_window: float
    spread_n: int
    spread_window: float
    pending_small: int
    pending_large: int
    fire_burst: int
    aps_pending_large: int
    aps_fire_burst: int


FULL = Sizes(50_000, 50_000, 1.0, 10_000, 2.0, 10_000, 1_000_000, 100_000, 100_000, 10_000)
QUICK = Sizes(10_000, 10_000, 1.0, 2_000, 2.0, 10_000, 100_000, 20_000, 20_000, 2_000)


def run(sizes: Sizes) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    step = lambda text: print(f"  {text} ...", file=sys.stderr, flush=True)  # noqa: E731

    step(f"schedule cost, N={sizes.schedule_n:,}")
    ours = schedule_cost(Flowsched, sizes.schedule_n, repeats=7)
    aps = schedule_cost(APScheduler, sizes.schedule_n, repeats=3)
    raw["schedule_cost_us"] = {
        "flowsched": [c * 1e6 for c in ours],
        "APScheduler": [c * 1e6 for c in aps],
    }
    ours_cost, aps_cost = statistics.median(ours), statistics.median(aps)

    for label, n, window in (
        ("burst", sizes.burst_n, sizes.burst_window),
        ("spread", sizes.spread_n, sizes.spread_window),
    ):
        step(f"lateness, {n:,} timers within {window:g} s")
        raw[f"lateness_{label}"] = {
            "n": n,
            "window_s": window,
            "flowsched": lateness(Flowsched, n, window, ours_cost * 3),
            "APScheduler": lateness(APScheduler, n, window, aps_cost * 3),
        }

    step(f"fire rate with {sizes.pending_small:,} / {sizes.pending_large:,} pending (flowsched)")
    raw["fire_rate_flowsched"] = [
        fire_rate(Flowsched, pending, sizes.fire_burst, repeats=3)
        for pending in (sizes.pending_small, sizes.pending_large)
    ]
    step(f"fire rate with {sizes.pending_small:,} / {sizes.aps_pending_large:,} (APScheduler)")
    raw["fire_rate_APScheduler"] = [
        fire_rate(APScheduler, pending, sizes.aps_fire_burst, repeats=2)
        for pending in (sizes.pending_small, sizes.aps_pending_large)
    ]
    return raw


def figures(raw: dict[str, Any], sizes: Sizes) -> list[dict[str, Any]]:
    """The issue's table: one row per figure, flowsched and APScheduler side by side."""
    ours_cost = raw["schedule_cost_us"]["flowsched"]
    aps_cost = raw["schedule_cost_us"]["APScheduler"]
    speedup = statistics.median(aps_cost) / statistics.median(ours_cost)
    burst, spread = raw["lateness_burst"], raw["lateness_spread"]
    small, large = raw["fire_rate_flowsched"]
    aps_small, aps_large = raw["fire_rate_APScheduler"]
    ratio = large["median_rate_per_s"] / small["median_rate_per_s"]
    aps_ratio = aps_large["median_rate_per_s"] / aps_small["median_rate_per_s"]
    return [
        {
            "figure": f"schedule cost per timer, N={sizes.schedule_n:,} (median; best)",
            "flowsched": f"{statistics.median(ours_cost):.2f} us; {min(ours_cost):.2f} us",
            "APScheduler": f"{statistics.median(aps_cost):.1f} us; {min(aps_cost):.1f} us",
            "target": "<= 2 us and >= 10x faster",
            "ok": statistics.median(ours_cost) <= 2.0 and speedup >= 10,
            "note": f"{speedup:.0f}x faster",
        },
        {
            "figure": f"{sizes.burst_n:,} timers due within {sizes.burst_window:g} s: p99 lateness",
            "flowsched": f"{burst['flowsched']['p99_ms']:.2f} ms",
            "APScheduler": f"{burst['APScheduler']['p99_ms']:.1f} ms",
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
            "figure": f"fire rate, {large['pending']:,} vs {small['pending']:,} pending (ratio)",
            "flowsched": f"{ratio:.2f} ({large['median_rate_per_s']:,.0f}/s vs "
            f"{small['median_rate_per_s']:,.0f}/s)",
            "APScheduler": f"{aps_ratio:.2f} at {aps_large['pending']:,} "
            f"({aps_large['median_rate_per_s']:,.0f}/s vs "
            f"{aps_small['median_rate_per_s']:,.0f}/s)",
            "target": ">= 0.7",
            "ok": ratio >= 0.7,
            "note": f"bursts of {large['burst']:,} (APScheduler {aps_large['burst']:,})",
        },
        {
            "figure": f"memory per pending timer at {large['pending']:,} (RSS delta)",
            "flowsched": f"{large['rss_bytes_per_pending']:.0f} B",
            "APScheduler": f"{aps_large['rss_bytes_per_pending']:.0f} B at "
            f"{aps_large['pending']:,}",
            "target": "<= 500 B",
            "ok": large["rss_bytes_per_pending"] <= 500,
            "note": "item, id, due, heap + map entry",
        },
    ]


def print_table(rows: list[dict[str, Any]]) -> None:
    columns = ["figure", "flowsched", "APScheduler", "target", "ok"]
    cells = [[str(row[c]) if c != "ok" else ("yes" if row[c] else "NO") for c in columns]
             for row in rows]  # fmt: skip
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = lambda values: (
        "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"
    )  # noqa: E501, E731
    print(line(columns))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print(line(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N: a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    print(f"memory_bench: flowsched InMemoryScheduler vs APScheduler {apscheduler.__version__}"
          f"{' (quick)' if args.quick else ''}", file=sys.stderr)  # fmt: skip
    started = time.perf_counter()
    raw = run(sizes)
    rows = figures(raw, sizes)
    print_table(rows)
    elapsed = time.perf_counter() - started
    print(f"({elapsed:.0f} s; results in {args.out})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "apscheduler": apscheduler.__version__,
        "workers": WORKERS,
        "elapsed_s": round(elapsed, 1),
        "figures": rows,
        "raw": raw,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
