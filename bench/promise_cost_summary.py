"""Medians of bench/results/promise_cost.sh's runs: per face and side, fired/s, round trips
per fired timer and p99 lateness, and each as a ratio to main 989defa's run of the same
round (the median of the per-round ratios). Several files pool their rounds (each file's
round N is a round of its own).

    python bench/promise_cost_summary.py RUNS.jsonl [MORE.jsonl ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

SIDES = ("base", "full", "no-confirm", "no-history", "neither", "bare", "bare-deep")
FIGURES = (("fired/s", "fired_per_s"), ("round trips", "round_trips_per_fired"))


def summary(paths: list[str]) -> list[str]:
    runs: dict[tuple[str, str], dict[tuple[int, int], dict[str, Any]]] = {}
    for n, path in enumerate(paths):
        with open(path) as lines:
            for line in lines:
                row = json.loads(line)
                if row["res"]:
                    runs.setdefault((row["face"], row["side"]), {})[(n, row["round"])] = row["res"]
    out = []
    for face in ("sync", "async"):
        base = runs.get((face, "base"), {})
        for side in SIDES:
            got = runs.get((face, side))
            if not got:
                continue
            parts = [f"{face:5} {side:10} n={len(got)}"]
            for label, key in (*FIGURES, ("p99 s", "p99_lateness_s")):
                median = statistics.median(r[key] for r in got.values())
                ratios = [got[n][key] / base[n][key] for n in got if base.get(n, {}).get(key)]
                each = ", ".join(f"{x:.2f}" for x in ratios)
                ratio = statistics.median(ratios) if ratios else float("nan")
                parts.append(f"{label} {median:.4g} ({ratio:.2f}x: {each})")
            out.append(" | ".join(parts))
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    print("\n".join(summary(sys.argv[1:])))
