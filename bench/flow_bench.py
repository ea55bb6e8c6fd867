"""The flow domain against the `transitions` state machine, side by side in one run.

    .venv/bin/python bench/flow_bench.py          # the full run (make bench), ~1 minute
    .venv/bin/python bench/flow_bench.py --quick  # smaller N, a smoke run

The path, per instance: ``start`` (enters ``Checking``, invokes the action ``Check`` - an
adapter that does nothing and answers later - and schedules its timeout (60 s), its first
retry (20 s, +/-20 % jitter: the default) and a processing-time deadline Checking -> Complete
(120 s)), then the completing response (the action's timers are cancelled, the flow enters the
terminal ``Complete`` and every timer of the instance is cancelled). Nothing fires: the
figure is what the domain costs per instance, timers included.

Contenders (each in ``RUNS`` fresh processes, alternating, the garbage collector on; the
figure is the median of the processes' rates; a warm-up of ``WARMUP`` instances first):

* ``flowsched``: ``FlowDomain`` with a started ``InMemoryScheduler`` (real clock) and the
  default in-memory flow store;
* ``flowsched, do-nothing scheduler``: the same domain on a ``SchedulerPort`` that stores
  nothing - the domain's own share;
* ``transitions`` (``Machine`` and ``LockedMachine``) with its ``Timeout`` state extension:
  bench/transitions_peer.py, run with bench/.venv-transitions/bin/python (its own
  virtualenv: ``make bench`` creates it). The ratio is taken against the faster of the two.

Also: bytes per pending flow-domain timer - tracemalloc over ``MEMORY_N`` instances waiting in
``Checking`` (three timers each), everything they keep alive (instances in the store, the
scheduler's items, heap and maps) divided by the number of pending timers; in a fresh process.

Results: a table on stdout, ``bench/results/flow.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from report import print_table

from flowsched import InMemoryScheduler, SchedulingConfig
from flowsched.flow import ActionRequest, ActionTimeoutEvent, Flow, FlowDomain
from flowsched.flow import ProcessingTimeElapsedEvent as Elapsed
from flowsched.port import DeadLetter, Handler, ScheduleItem, ScheduleKind, SchedulerPort

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "flow.json"
PEER_PYTHON = HERE / ".venv-transitions" / "bin" / "python"
PEER = HERE / "transitions_peer.py"
FLOW = "Bench"
CONFIG = f"""
{FLOW}.Checking.Check {{
  timeout-duration = 60s
  max-retries = 1
  initial-retry-interval = 20s
}}
ipf.flow.{FLOW}.processing-time.Checking.Complete.timeout-duration = 120s
"""


@dataclass(frozen=True)
class Passed:
    """The completing response to ``Check``."""


def bench_flow() -> Flow:
    return (
        Flow(FLOW)
        .initial("Checking", invokes="Check")
        .terminal("Complete", "TimedOut", "TooSlow")
        .response(Passed, to="Check")
        .on(Passed, in_state="Checking", go_to="Complete")
        .on(ActionTimeoutEvent, in_state="Checking", action="Check", go_to="TimedOut")
        .on(Elapsed, in_state="Checking", destination="Complete", go_to="TooSlow")
    )


def check(request: ActionRequest) -> None:
    """The action: does nothing and answers later (the loop sends the response)."""


class DoNothingScheduler(SchedulerPort):
    """A scheduler that stores nothing: what is left is the domain's own cost."""

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        return item

    def now(self) -> datetime:
        return datetime.now(UTC)

    def cancel(self, item_id: str) -> bool:
        return False

    def cancel_flow(self, flow_id: str) -> int:
        return 0

    def exists(self, item_id: str) -> bool:
        return False

    def get(self, item_id: str) -> ScheduleItem | None:
        return None

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        pass

    def register(self, name: str, handler: Handler, **options: Any) -> None:
        pass

    def dead_letters(self) -> list[DeadLetter]:
        return []

    def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        return False

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def pending(self) -> int:
        return 0


def domain_on(scheduler: SchedulerPort) -> FlowDomain:
    return (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONFIG))
        .with_scheduler_adapter(scheduler)
        .with_flow(bench_flow())
        .with_action_adapter("Check", check)
        .build()
    )


# -- in a child process -------------------------------------------------------------------


def throughput_here(contender: str, n: int, warmup: int) -> dict[str, Any]:
    """Instances per second through start -> response -> complete, in this process."""
    scheduler: SchedulerPort = (
        DoNothingScheduler() if contender == "do-nothing" else InMemoryScheduler()
    )
    scheduler.start()
    domain = domain_on(scheduler)
    start, handle, passed = domain.start, domain.handle, Passed()

    def run(prefix: str, count: int) -> None:
        for i in range(count):
            flow_id = f"{prefix}-{i}"
            start(FLOW, flow_id)
            if handle(flow_id, passed).state != "Complete":
                raise AssertionError(f"{flow_id} did not complete")

    run("w", warmup)
    gc.collect()
    cpu, began = time.process_time(), time.perf_counter()
    run("f", n)
    seconds = time.perf_counter() - began
    cpu = time.process_time() - cpu
    if contender == "flowsched":
        assert isinstance(scheduler, InMemoryScheduler)
        left = scheduler.pending()
        if left:
            raise AssertionError(f"{left} timers still pending after completion")
    scheduler.close()
    return {
        "instances": n,
        "seconds": seconds,
        "per_instance_us": seconds / n * 1e6,
        "instances_per_s": n / seconds,
        "cpu_s": cpu,  # every thread of the process; less disturbed by other processes
    }


def memory_here(n: int) -> dict[str, Any]:
    """tracemalloc bytes per pending timer with ``n`` instances waiting, in this process."""
    scheduler = InMemoryScheduler()  # not started: nothing fires while it is measured
    domain = domain_on(scheduler)
    domain.start(FLOW, "warm-up")  # caches filled by a first instance are not per-instance
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        domain.start(FLOW, f"payment-{i:06d}")
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    timers = scheduler.pending() - 3  # the warm-up instance's
    scheduler.close()
    return {
        "instances": n,
        "pending_timers": timers,
        "bytes_per_timer": traced / timers,
        "bytes_per_instance": traced / n,
    }


# -- the run ------------------------------------------------------------------------------


def child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    ).stdout
    return dict(json.loads(out))


def peer(machine: str, n: int, warmup: int) -> dict[str, Any]:
    if not PEER_PYTHON.exists():
        raise SystemExit(
            f"{PEER_PYTHON} is missing: `make bench` creates it "
            "(python3 -m venv bench/.venv-transitions && "
            "bench/.venv-transitions/bin/pip install transitions)"
        )
    command = [str(PEER_PYTHON), str(PEER), machine, str(n), str(warmup)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


@dataclass(frozen=True)
class Sizes:
    n: int
    peer_n: int
    warmup: int
    runs: int
    memory_n: int


FULL = Sizes(n=20_000, peer_n=5_000, warmup=1_000, runs=3, memory_n=20_000)
QUICK = Sizes(n=2_000, peer_n=1_000, warmup=200, runs=1, memory_n=2_000)


def run(sizes: Sizes) -> dict[str, Any]:
    contenders: dict[str, Callable[[], dict[str, Any]]] = {
        "flowsched": lambda: child(["--child", "flowsched", str(sizes.n), str(sizes.warmup)]),
        "flowsched_do_nothing_scheduler": lambda: child(
            ["--child", "do-nothing", str(sizes.n), str(sizes.warmup)]
        ),
        "transitions_Machine": lambda: peer("Machine", sizes.peer_n, sizes.warmup),
        "transitions_LockedMachine": lambda: peer("LockedMachine", sizes.peer_n, sizes.warmup),
    }
    raw: dict[str, Any] = {name: [] for name in contenders}
    for round_ in range(sizes.runs):
        # Alternate the contenders, so that each sees the same machine conditions.
        print(f"  round {round_ + 1}/{sizes.runs} ...", file=sys.stderr, flush=True)
        for name, measure in contenders.items():
            raw[name].append(measure())
    print(f"  memory, {sizes.memory_n:,} waiting instances ...", file=sys.stderr, flush=True)
    raw["memory"] = child(["--memory", str(sizes.memory_n)])
    return raw


def median_rate(runs: list[dict[str, Any]]) -> float:
    return float(statistics.median(r["instances_per_s"] for r in runs))


def cpu_rate(runs: list[dict[str, Any]]) -> float:
    """Median instances per CPU second (of every thread of the process)."""
    return float(statistics.median(r["instances"] / r["cpu_s"] for r in runs))


def figures(raw: dict[str, Any]) -> list[dict[str, Any]]:
    ours = median_rate(raw["flowsched"])
    alone = median_rate(raw["flowsched_do_nothing_scheduler"])
    machine = median_rate(raw["transitions_Machine"])
    locked = median_rate(raw["transitions_LockedMachine"])
    peer_best = max(machine, locked)
    memory = raw["memory"]
    return [
        {
            "figure": "flow instances/s: start -> response -> complete "
            "(timeout + retry + deadline each; median of processes)",
            "flowsched": f"{ours:,.0f}/s ({1e6 / ours:.0f} us)",
            "transitions": f"{machine:,.0f}/s Machine, {locked:,.0f}/s LockedMachine",
            "target": ">= 10,000/s and >= 3x transitions",
            "ok": ours >= 10_000 and ours >= 3 * peer_best,
            "note": f"{ours / peer_best:.1f}x the faster transitions variant; domain alone "
            f"(do-nothing scheduler) {alone:,.0f}/s; by CPU time: flowsched "
            f"{cpu_rate(raw['flowsched']):,.0f}/s, transitions Machine "
            f"{cpu_rate(raw['transitions_Machine']):,.0f}/s",
        },
        {
            "figure": f"memory per pending flow-domain timer ({memory['instances']:,} waiting "
            "instances, tracemalloc)",
            "flowsched": f"{memory['bytes_per_timer']:.0f} B",
            "transitions": "-",
            "target": "<= 600 B",
            "ok": memory["bytes_per_timer"] <= 600,
            "note": f"{memory['pending_timers']:,} timers; "
            f"{memory['bytes_per_instance']:.0f} B per instance, its timers included",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N, one round")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--memory", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        contender, n, warmup = args.child
        print(json.dumps(throughput_here(contender, int(n), int(warmup))))
        return
    if args.memory:
        print(json.dumps(memory_here(args.memory)))
        return
    sizes = QUICK if args.quick else FULL
    print(f"flow_bench{' (quick)' if args.quick else ''}", file=sys.stderr)
    began = time.perf_counter()
    raw = run(sizes)
    rows = figures(raw)
    elapsed = time.perf_counter() - began
    print_table(rows, "transitions")
    print(f"({elapsed:.0f} s; medians of {sizes.runs} processes each; results in {args.out})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "transitions": raw["transitions_Machine"][0].get("transitions"),
        "elapsed_s": round(elapsed, 1),
        "sizes": sizes.__dict__,
        "figures": rows,
        "raw": raw,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
