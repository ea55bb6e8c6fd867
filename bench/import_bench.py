"""How long ``import flowsched`` and a cold ``flowsched --help`` take, beside a baseline.

Each figure is the median of ``RUNS`` fresh processes (one warm-up run first, so that both
trees have their bytecode compiled: "cold" is a new process, not a new install):

* import: the cumulative microseconds of the ``flowsched`` line of
  ``python -X importtime -c "import flowsched"`` (what the target is about), and the
  process's wall time;
* ``--help``: the wall time of ``flowsched --help`` (run as the console script does:
  ``from flowsched.cli import main; main()``).

The baseline is the code of another commit (``--baseline REV``, default ``021813c``, the main
this work started from), exported with ``git archive`` into a temporary directory and run by
the same interpreter, in the same run, alternating with this tree's processes so that the
machine's load falls on both alike. Nothing is installed and no git metadata is written.

Targets: import <= 150 ms, ``--help`` <= 300 ms. Prints a table and writes
bench/results/import.json with the load average before and after.
Run: ``.venv/bin/python bench/import_bench.py`` (or ``make bench``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from report import print_table

ROOT = Path(__file__).resolve().parent.parent
RUNS = 5
IMPORT_TARGET_MS = 150.0
HELP_TARGET_MS = 300.0
HELP = "import sys; sys.argv = ['flowsched', '--help']; from flowsched.cli import main; main()"
_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| flowsched$", re.MULTILINE)


def _run(tree: Path, args: list[str]) -> tuple[float, str]:
    """Wall milliseconds and stderr of ``python args`` importing flowsched from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": ""}
    env.pop("FLOWSCHED_CONFIG", None)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    return (time.perf_counter() - started) * 1000, done.stderr


def _import_ms(tree: Path) -> tuple[float, float]:
    wall, err = _run(tree, ["-X", "importtime", "-c", "import flowsched"])
    found = _LINE.search(err)
    if found is None:
        raise RuntimeError(f"no 'flowsched' line in -X importtime output from {tree}")
    return int(found[1]) / 1000, wall


def _help_ms(tree: Path) -> float:
    return _run(tree, ["-c", HELP])[0]


def _origin(tree: Path) -> str:
    """Which flowsched a process run on ``tree`` imports (a check that PYTHONPATH wins)."""
    code = "import flowsched, os; print(os.path.dirname(flowsched.__file__))"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True)
    return out.stdout.decode().strip()


def _export(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "flowsched"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def measure(trees: dict[str, Path]) -> dict[str, dict[str, list[float]]]:
    """Every figure, ``RUNS`` times, the trees alternating."""
    figures: dict[str, dict[str, list[float]]] = {
        name: {"import_ms": [], "import_wall_ms": [], "help_ms": []} for name in trees
    }
    for tree in trees.values():  # warm-up: compile the bytecode of both trees
        _import_ms(tree)
        _help_ms(tree)
    for _ in range(RUNS):
        for name, tree in trees.items():
            importtime, wall = _import_ms(tree)
            figures[name]["import_ms"].append(round(importtime, 1))
            figures[name]["import_wall_ms"].append(round(wall, 1))
            figures[name]["help_ms"].append(round(_help_ms(tree), 1))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="021813c", help="the commit to compare with")
    options = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="flowsched-baseline-") as scratch:
        baseline = Path(scratch)
        _export(options.baseline, baseline)
        trees = {"flowsched": ROOT, options.baseline: baseline}
        for tree in trees.values():
            if _origin(tree) != str(tree / "flowsched"):
                raise RuntimeError(f"PYTHONPATH={tree} does not win over the installed flowsched")
        figures = measure(trees)
    medians = {
        name: {key: statistics.median(values) for key, values in runs.items()}
        for name, runs in figures.items()
    }
    ours, theirs = medians["flowsched"], medians[options.baseline]
    rows = [
        {
            "figure": "import flowsched (-X importtime, ms)",
            "flowsched": f"{ours['import_ms']:.0f}",
            options.baseline: f"{theirs['import_ms']:.0f}",
            "target": f"<= {IMPORT_TARGET_MS:.0f}",
            "ok": ours["import_ms"] <= IMPORT_TARGET_MS,
        },
        {
            "figure": "python -c 'import flowsched' (wall, ms)",
            "flowsched": f"{ours['import_wall_ms']:.0f}",
            options.baseline: f"{theirs['import_wall_ms']:.0f}",
            "target": "-",
            "ok": True,
        },
        {
            "figure": "flowsched --help (wall, ms)",
            "flowsched": f"{ours['help_ms']:.0f}",
            options.baseline: f"{theirs['help_ms']:.0f}",
            "target": f"<= {HELP_TARGET_MS:.0f}",
            "ok": ours["help_ms"] <= HELP_TARGET_MS,
        },
    ]
    print(f"median of {RUNS} fresh processes each, baseline {options.baseline} in the same run")
    print_table(rows, options.baseline)
    result = {
        "benchmark": "import and CLI start-up",
        "command": ".venv/bin/python bench/import_bench.py",
        "baseline": options.baseline,
        "runs": RUNS,
        "targets_ms": {"import": IMPORT_TARGET_MS, "help": HELP_TARGET_MS},
        "medians_ms": medians,
        "runs_ms": figures,
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    out = ROOT / "bench" / "results" / "import.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
