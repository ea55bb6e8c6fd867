"""Medians of a ``bench/results/postgres_fire_rate_s6.sh`` set: each contender's fired/s as a
ratio to the floor of the same round, and its p99 lateness, per round and their medians.

    python bench/postgres_fire_summary.py bench/results/postgres_fire_rate_s6.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

FLOOR = ("floor", "now")


def summary(lines: list[str]) -> list[str]:
    """One line per contender (``(contender, tree)``), floor first."""
    rounds: dict[int, dict[tuple[str, str], dict[str, Any]]] = {}
    for line in lines:
        if line.strip():
            record = json.loads(line)
            key = (record["contender"], record["tree"])
            rounds.setdefault(record["round"], {})[key] = record["out"]
    report = []
    for key in sorted({key for runs in rounds.values() for key in runs}):
        ratios = [
            runs[key]["fired_per_s"] / runs[FLOOR]["fired_per_s"]
            for runs in rounds.values()
            if key in runs and FLOOR in runs
        ]
        p99 = [runs[key].get("p99_ms") or 0.0 for runs in rounds.values() if key in runs]
        report.append(
            f"{key}: fired/s vs floor median {statistics.median(ratios):.2f} "
            f"{[round(r, 2) for r in ratios]}; p99 median {statistics.median(p99):.1f} ms "
            f"{[round(p) for p in p99]}"
        )
    return report


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as results:
        print("\n".join(summary(results.readlines())))
