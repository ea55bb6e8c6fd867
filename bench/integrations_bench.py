"""Durable timeouts for ``transitions`` against transitions' own ``Timeout``, in one run.

    .venv/bin/python bench/integrations_bench.py          # the full run, ~1 minute
    .venv/bin/python bench/integrations_bench.py --quick  # smaller N, a smoke run

Same venv, same run, fresh processes (``RUNS`` of each, alternating; the figure is the median):

* **enter + leave**: one model goes ``A -> B -> A`` ``N`` times, ``B`` a timeout state (60 s,
  never reached). ``ours``: ``DurableMachine`` on a started ``InMemoryScheduler`` (real clock)
  - each entry schedules a flowsched timer, each exit cancels it. ``theirs``: ``Machine`` with
  transitions' ``Timeout`` - each entry starts a ``threading.Timer``, each exit cancels it.
  ``plain``: ``Machine`` without timeouts, the machine's own share. The target: ours costs at
  most 0.5x theirs.
* **memory per waiting model**: tracemalloc over ``MEMORY_N`` models left waiting in ``B``:
  everything they keep alive (models, timers, threads' Python objects) divided by ``N``;
  ``plain`` is the same models in a state without a timeout.
* **threads held** with ``THREADS_N`` models waiting (``threading.active_count()``).

Results: a table on stdout, ``bench/results/integrations.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "integrations.json"
RUNS = 5
ENTER_N = 20_000
MEMORY_N = 5_000
THREADS_N = 10_000
KINDS = ("ours", "theirs", "plain")


def _states(kind: str) -> list[Any]:
    if kind == "plain":
        return ["A", "B"]
    return ["A", {"name": "B", "timeout": 60, "on_timeout": "to_A"}]


class Model:
    def __init__(self, model_id: str) -> None:
        self.id = model_id


def build(kind: str, models: list[Model]) -> tuple[Any, Any]:
    """``(machine, scheduler or None)`` of ``kind`` managing ``models``, all in ``A``."""
    from transitions import Machine
    from transitions.extensions.states import Timeout, add_state_features

    if kind == "ours":
        from flowsched import InMemoryScheduler
        from flowsched.integrations.transitions import DurableMachine

        scheduler = InMemoryScheduler()
        scheduler.start()
        machine = DurableMachine(
            model=models, states=_states(kind), initial="A", scheduler=scheduler, name="Bench"
        )
        return machine, scheduler
    if kind == "theirs":

        @add_state_features(Timeout)
        class TimeoutMachine(Machine):
            pass

        return TimeoutMachine(model=models, states=_states(kind), initial="A"), None
    return Machine(model=models, states=_states(kind), initial="A"), None


def child_enter_leave(kind: str, n: int) -> dict[str, float]:
    model = Model("m-1")
    _, scheduler = build(kind, [model])
    enter, leave = model.to_B, model.to_A  # type: ignore[attr-defined]
    for _ in range(min(n // 10, 1000)):  # warm-up
        enter()
        leave()
    gc.collect()
    started = time.perf_counter()
    for _ in range(n):
        enter()
        leave()
    elapsed = time.perf_counter() - started
    if scheduler is not None:
        scheduler.close()
    return {"us_per_enter_leave": elapsed / n * 1e6}


def child_memory(kind: str, n: int) -> dict[str, float]:
    warm_model = Model("warm-up")
    _, warm_scheduler = build(kind, [warm_model])  # imports and one-off set-up first
    warm_model.to_B()  # type: ignore[attr-defined]
    if warm_scheduler is not None:
        warm_scheduler.close()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    models = [Model(f"m-{i}") for i in range(n)]
    machine, scheduler = build(kind, models)
    for model in models:
        model.to_B()  # type: ignore[attr-defined]
    gc.collect()
    after = tracemalloc.take_snapshot()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    tracemalloc.stop()
    threads = threading.active_count()
    result = {"bytes_per_waiting_model": grown / n, "threads": float(threads)}
    for model in models:
        model.to_A()  # type: ignore[attr-defined]
    if scheduler is not None:
        scheduler.close()
    del machine
    return result


def child_threads(kind: str, n: int) -> dict[str, float]:
    models = [Model(f"m-{i}") for i in range(n)]
    _, scheduler = build(kind, models)
    baseline = threading.active_count()
    for model in models:
        model.to_B()  # type: ignore[attr-defined]
    held = threading.active_count()
    for model in models:
        model.to_A()  # type: ignore[attr-defined]
    if scheduler is not None:
        scheduler.close()
    return {"threads_before": float(baseline), "threads_waiting": float(held)}


CHILDREN = {"enter_leave": child_enter_leave, "memory": child_memory, "threads": child_threads}


def run_child(what: str, kind: str, n: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, kind, str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "KIND", "N"))
    args = parser.parse_args()
    if args.child:
        what, kind, n = args.child
        print(json.dumps(CHILDREN[what](kind, int(n))))
        return
    runs = 3 if args.quick else RUNS
    enter_n = ENTER_N // 10 if args.quick else ENTER_N
    memory_n = MEMORY_N // 5 if args.quick else MEMORY_N
    threads_n = THREADS_N // 10 if args.quick else THREADS_N

    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(runs):
        for kind in KINDS:  # alternating: load on the machine hits each alike
            samples[kind].append(run_child("enter_leave", kind, enter_n)["us_per_enter_leave"])
    cost = {kind: statistics.median(values) for kind, values in samples.items()}
    memory = {kind: run_child("memory", kind, memory_n) for kind in KINDS}
    threads = {kind: run_child("threads", kind, threads_n) for kind in ("ours", "theirs")}

    ratio = cost["ours"] / cost["theirs"]
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "runs": runs,
        "enter_leave_n": enter_n,
        "us_per_enter_leave_median": cost,
        "samples": samples,
        "ratio_ours_to_theirs": ratio,
        "target_ratio": 0.5,
        "memory_n": memory_n,
        "bytes_per_waiting_model": {k: v["bytes_per_waiting_model"] for k, v in memory.items()},
        "threads_n": threads_n,
        "threads": threads,
    }
    print(f"enter + leave a timeout state, median of {runs} fresh processes x {enter_n}:")
    for kind in KINDS:
        print(f"  {kind:7s} {cost[kind]:8.1f} us")
    print(f"  ours / theirs = {ratio:.2f} (target <= 0.5)")
    print(f"memory per waiting model ({memory_n} waiting):")
    for kind in KINDS:
        print(f"  {kind:7s} {memory[kind]['bytes_per_waiting_model']:8.0f} B")
    print(f"threads with {threads_n} models waiting:")
    for kind in ("ours", "theirs"):
        held, before = threads[kind]["threads_waiting"], threads[kind]["threads_before"]
        print(f"  {kind:7s} {held:.0f} (before entering: {before:.0f})")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
