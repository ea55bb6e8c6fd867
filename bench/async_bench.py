"""The asyncio face: ``AsyncInMemoryScheduler`` against APScheduler 4, in one run.

    .venv/bin/python bench/async_bench.py          # the full run (make bench), ~3 minutes
    .venv/bin/python bench/async_bench.py --quick  # smaller N, one round: a smoke run

Figures (each contender in ``runs`` fresh processes, alternating; medians of the processes;
the garbage collector on; item - or trigger - construction included):

* ``await schedule()`` cost per call (wall time, as in the other benches; CPU time shown
  too): ``await scheduler.schedule(ScheduleItem(...))`` on a started
  ``AsyncInMemoryScheduler`` vs APScheduler 4.0.0a6 ``await
  AsyncScheduler.add_schedule(job, DateTrigger(...))`` on a ``MemoryDataStore``
  (bench/apscheduler4_peer.py, in bench/.venv-apscheduler4: ``make bench`` makes it); due an
  hour ahead, nothing fires. Target: >= 10x cheaper.
* Fire lateness: 10,000 one-shot timers due uniformly over 2 s (from 3 s after scheduling
  begins, so that both have scheduled everything), an ``async def`` handler recording fire
  time minus due time. Target: p99 <= APScheduler 4's.
* Event-loop health: 10,000 timers pending (an hour ahead) and 2,000 firing within 1 s
  (``async def`` handlers), while a 1 ms ticker records its worst gap and an
  ``asyncio.sleep(0.01)`` ticker its delays; a second process runs the same in asyncio
  debug mode with ``slow_callback_duration = 0.01`` and counts the callbacks it reports
  (for information: debug mode records every task's creation stack, which makes a task
  cost tens of microseconds). A third process runs the two tickers alone: the machine's
  floor (on a loaded two-core machine the OS alone makes gaps of several ms). Targets: no
  callback > 10 ms (worst 1 ms-ticker gap <= 10 ms), 10 ms-ticker p99 delay <= 10 ms.

Results: a table on stdout, ``bench/results/async.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from report import print_table

from flowsched import AsyncInMemoryScheduler, ScheduleItem, ScheduleKind

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "async.json"
PEER_PYTHON = HERE / ".venv-apscheduler4" / "bin" / "python"
PEER = HERE / "apscheduler4_peer.py"
TIMER = ScheduleKind.TIMER
HEAD_START = 3.0  # as in apscheduler4_peer.py


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


# -- in a child process ----------------------------------------------------------------------


async def schedule_cost(n: int, warmup: int) -> dict[str, Any]:
    async with AsyncInMemoryScheduler() as scheduler:
        later = datetime.now(UTC) + timedelta(hours=1)
        for i in range(warmup):
            await scheduler.schedule(ScheduleItem(f"w{i}", TIMER, later))
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            await scheduler.schedule(
                ScheduleItem(f"s{i}", TIMER, later + timedelta(microseconds=i))
            )
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "n": n,
        "seconds": seconds,
        "per_call_us": seconds / n * 1e6,
        "cpu_per_call_us": cpu / n * 1e6,
    }


async def lateness(n: int, span: float) -> dict[str, Any]:
    late: list[float] = []
    everything = asyncio.Event()

    async def handler(item: ScheduleItem, attempt: int) -> None:
        late.append(time.time() - item.due.timestamp())
        if len(late) == n:
            everything.set()

    async with AsyncInMemoryScheduler() as scheduler:
        scheduler.subscribe(TIMER, handler)
        first = time.time() + HEAD_START
        for i in range(n):
            due = datetime.fromtimestamp(first + span * i / n, UTC)
            await scheduler.schedule(ScheduleItem(f"t{i}", TIMER, due))
        await asyncio.wait_for(everything.wait(), HEAD_START + span + 60)
    return {
        "n": n,
        "fired": len(late),
        "p50": percentile(late, 0.50),
        "p99": percentile(late, 0.99),
        "max": max(late),
    }


class SlowCallbacks(logging.Handler):
    """Counts asyncio debug mode's "Executing ... took N seconds" reports."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Executing" in message and "took" in message:
            self.reports.append(message[:200])


async def health(pending: int, firing: int, window: float, debug: bool) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    slow = SlowCallbacks()
    if debug:
        loop.set_debug(True)
        loop.slow_callback_duration = 0.010
        logging.getLogger("asyncio").addHandler(slow)
    fired = 0
    gaps: list[float] = []
    delays: list[float] = []
    measuring = True

    async def handler(item: ScheduleItem, attempt: int) -> None:
        nonlocal fired
        fired += 1

    async def ticker(period: float, into: list[float]) -> None:
        while measuring:
            began = time.perf_counter()
            await asyncio.sleep(period)
            into.append(time.perf_counter() - began - period)

    async with AsyncInMemoryScheduler() as scheduler:
        scheduler.subscribe(TIMER, handler)
        later = datetime.now(UTC) + timedelta(hours=1)
        for i in range(pending):
            await scheduler.schedule(ScheduleItem(f"p{i}", TIMER, later))
        start = datetime.now(UTC) + timedelta(seconds=0.3)
        for i in range(firing):
            due = start + timedelta(seconds=window * i / firing)
            await scheduler.schedule(ScheduleItem(f"f{i}", TIMER, due))
        tickers = [
            asyncio.create_task(ticker(0.001, gaps)),
            asyncio.create_task(ticker(0.010, delays)),
        ]
        deadline = time.monotonic() + 0.3 + window + 30
        while fired < firing and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        measuring = False
        await asyncio.gather(*tickers)
    return {
        "pending": pending,
        "firing": firing,
        "fired": fired,
        "debug": debug,
        "worst_1ms_gap_ms": max(gaps) * 1e3,
        "p99_10ms_delay_ms": percentile(delays, 0.99) * 1e3,
        "slow_callbacks": slow.reports,
    }


async def floor(seconds: float) -> dict[str, Any]:
    """The two tickers alone, no scheduler: what the machine itself allows."""
    gaps: list[float] = []
    delays: list[float] = []
    until = time.monotonic() + seconds

    async def ticker(period: float, into: list[float]) -> None:
        while time.monotonic() < until:
            began = time.perf_counter()
            await asyncio.sleep(period)
            into.append(time.perf_counter() - began - period)

    await asyncio.gather(ticker(0.001, gaps), ticker(0.010, delays))
    return {
        "worst_1ms_gap_ms": max(gaps) * 1e3,
        "p99_10ms_delay_ms": percentile(delays, 0.99) * 1e3,
    }


# -- the run ----------------------------------------------------------------------------------


def child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], check=True, capture_output=True, text=True
    ).stdout
    return dict(json.loads(out))


def peer(args: list[str]) -> dict[str, Any]:
    if not PEER_PYTHON.exists():
        raise SystemExit(f"{PEER_PYTHON} is missing: `make bench` creates it")
    command = [str(PEER_PYTHON), str(PEER), *args]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


@dataclass(frozen=True)
class Sizes:
    schedule_n: int
    warmup: int
    late_n: int
    span: float
    pending: int
    firing: int
    window: float
    runs: int


FULL = Sizes(20_000, 2_000, 10_000, 2.0, 10_000, 2_000, 1.0, 3)
QUICK = Sizes(2_000, 200, 1_000, 1.0, 1_000, 200, 0.5, 1)


def run(sizes: Sizes) -> dict[str, Any]:
    raw: dict[str, list[dict[str, Any]]] = {
        name: []
        for name in ("schedule", "peer_schedule", "late", "peer_late", "health", "debug", "floor")
    }
    for round_ in range(sizes.runs):
        print(f"  round {round_ + 1}/{sizes.runs} ...", file=sys.stderr, flush=True)
        raw["schedule"].append(child(["schedule", str(sizes.schedule_n), str(sizes.warmup)]))
        raw["peer_schedule"].append(peer(["schedule", str(sizes.schedule_n), str(sizes.warmup)]))
        raw["late"].append(child(["lateness", str(sizes.late_n), str(sizes.span)]))
        raw["peer_late"].append(peer(["lateness", str(sizes.late_n), str(sizes.span)]))
        shape = [str(sizes.pending), str(sizes.firing), str(sizes.window)]
        raw["health"].append(child(["health", *shape, "0"]))
        raw["debug"].append(child(["health", *shape, "1"]))
        raw["floor"].append(child(["floor", str(sizes.window + 0.5)]))
    return raw


def med(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in runs)


def figures(raw: dict[str, Any], sizes: Sizes) -> list[dict[str, Any]]:
    ours = med(raw["schedule"], "cpu_per_call_us")
    theirs = med(raw["peer_schedule"], "cpu_per_call_us")
    wall, peer_wall = med(raw["schedule"], "per_call_us"), med(raw["peer_schedule"], "per_call_us")
    paired = statistics.median(
        p["per_call_us"] / o["per_call_us"]
        for o, p in zip(raw["schedule"], raw["peer_schedule"], strict=True)
    )
    floor_gap = med(raw["floor"], "worst_1ms_gap_ms")
    best_gap = min(r["worst_1ms_gap_ms"] for r in raw["health"])
    floor_delay = med(raw["floor"], "p99_10ms_delay_ms")
    p99, peer_p99 = med(raw["late"], "p99"), med(raw["peer_late"], "p99")
    gap = med(raw["health"], "worst_1ms_gap_ms")
    delay = med(raw["health"], "p99_10ms_delay_ms")
    reports = [len(r["slow_callbacks"]) for r in raw["debug"]]
    lost = sum(r["n"] - r["fired"] for r in raw["late"])
    return [
        {
            "figure": "await schedule() cost per call, item construction included",
            "flowsched": f"{wall:.2f} us (CPU {ours:.2f} us)",
            "APScheduler 4": f"{peer_wall:.1f} us (CPU {theirs:.1f} us; add_schedule, "
            "DateTrigger, MemoryDataStore)",
            "target": ">= 10x cheaper",
            "ok": peer_wall >= 10 * wall,
            "note": f"{peer_wall / wall:.1f}x cheaper by wall time, {theirs / ours:.1f}x by CPU "
            f"time; median of paired per-round ratios {paired:.1f}x",
        },
        {
            "figure": f"fire lateness p99, {sizes.late_n:,} timers over {sizes.span:g} s",
            "flowsched": f"{p99 * 1e3:.2f} ms (p50 {med(raw['late'], 'p50') * 1e3:.2f} ms)",
            "APScheduler 4": f"{peer_p99 * 1e3:,.0f} ms (p50 "
            f"{med(raw['peer_late'], 'p50') * 1e3:,.0f} ms)",
            "target": "<= APScheduler 4's",
            "ok": p99 <= peer_p99 and lost == 0,
            "note": f"{lost} lost",
        },
        {
            "figure": f"loop health, {sizes.pending:,} pending + {sizes.firing:,} firing in "
            f"{sizes.window:g} s: worst gap of a 1 ms ticker",
            "flowsched": f"{gap:.2f} ms (best process {best_gap:.2f} ms)",
            "APScheduler 4": "-",
            "target": "<= 10 ms",
            "ok": gap <= 10,
            "note": f"the same ticker with no scheduler (the machine's floor): {floor_gap:.2f} ms",
        },
        {
            "figure": "loop health: p99 delay of a concurrent asyncio.sleep(0.01) ticker",
            "flowsched": f"{delay:.2f} ms",
            "APScheduler 4": "-",
            "target": "<= 10 ms",
            "ok": delay <= 10,
            "note": f"floor {floor_delay:.2f} ms; asyncio debug mode (slow_callback_duration "
            f"10 ms; it records each task's creation stack) reported {reports} callbacks",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N, one round")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, *rest = args.child
        if mode == "schedule":
            result = asyncio.run(schedule_cost(int(rest[0]), int(rest[1])))
        elif mode == "lateness":
            result = asyncio.run(lateness(int(rest[0]), float(rest[1])))
        elif mode == "floor":
            result = asyncio.run(floor(float(rest[0])))
        else:
            pending, firing, window, debug = rest
            result = asyncio.run(health(int(pending), int(firing), float(window), debug == "1"))
        print(json.dumps(result))
        return
    sizes = QUICK if args.quick else FULL
    print(f"async_bench{' (quick)' if args.quick else ''}", file=sys.stderr)
    began = time.perf_counter()
    raw = run(sizes)
    rows = figures(raw, sizes)
    elapsed = time.perf_counter() - began
    print_table(rows, "APScheduler 4")
    print(f"({elapsed:.0f} s; medians of {sizes.runs} processes each; results in {args.out})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "elapsed_s": round(elapsed, 1),
        "sizes": sizes.__dict__,
        "figures": rows,
        "raw": raw,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
