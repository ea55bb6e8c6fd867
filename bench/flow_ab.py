"""The flow-domain throughput of two checkouts, side by side: did a change regress it?

    python bench/flow_ab.py OLD_TREE NEW_TREE [ROUNDS]

Runs ``flow_bench.throughput_here`` (start -> response -> complete, 20,000 instances after
1,000 warm-up) in a fresh process per measurement, each tree on ``PYTHONPATH``, the two trees
taking turns, with flowsched's in-memory scheduler and with a do-nothing one (the domain
alone). Rates are instances per CPU second of the process (less disturbed by the rest of a
shared machine than wall time); the medians are printed with every round.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CODE = """
import json, sys
sys.path.insert(0, "bench")
import flow_bench
print(json.dumps(flow_bench.throughput_here(sys.argv[1], 20000, 1000)))
"""


def rate(tree: Path, contender: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CODE, contender],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    run = json.loads(out)
    return float(run["instances"] / run["cpu_s"])


def main() -> None:
    trees = {"old": Path(sys.argv[1]).resolve(), "new": Path(sys.argv[2]).resolve()}
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    rates: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for name, tree in trees.items():
            for contender in ("flowsched", "do-nothing"):
                rates.setdefault((name, contender), []).append(rate(tree, contender))
    for (name, contender), values in sorted(rates.items()):
        each = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{name} {contender}: median {statistics.median(values):,.0f}/s ({each})")


if __name__ == "__main__":
    main()
