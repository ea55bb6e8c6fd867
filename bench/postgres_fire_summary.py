"""Medians of ``bench/results/postgres_fire_rate_s6.sh`` sets: each contender's fired/s and
p99 lateness as ratios to the floor of the same round, its p99 per round, and its
statements per fired timer (median and worst round). Several files: their rounds pooled
(each round still judged against its own floor).

    python bench/postgres_fire_summary.py bench/results/postgres_fire_rate_s8a.jsonl [more.jsonl]
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

FLOOR = ("floor", "now")


def summary(lines: list[str]) -> list[str]:
    """One line per contender (``(contender, tree)``), floor first. A line ``{"set": n}``
    or the file a line came from (see ``__main__``) separates the rounds of two sets."""
    rounds: dict[tuple[int, int], dict[tuple[str, str], dict[str, Any]]] = {}
    for line in lines:
        if line.strip():
            record = json.loads(line)
            key = (record["contender"], record["tree"])
            where = (record.get("set", 0), record["round"])
            rounds.setdefault(where, {})[key] = record["out"]
    report = []
    for key in sorted({key for runs in rounds.values() for key in runs}):
        paired = [runs for runs in rounds.values() if key in runs and FLOOR in runs]
        rate = [runs[key]["fired_per_s"] / runs[FLOOR]["fired_per_s"] for runs in paired]
        late = [(runs[key].get("p99_ms") or 0.0) / runs[FLOOR]["p99_ms"] for runs in paired]
        p99 = [runs[key].get("p99_ms") or 0.0 for runs in paired]
        statements = [runs[key].get("statements_per_timer") or 0.0 for runs in paired]
        report.append(
            f"{key}: {len(paired)} rounds; fired/s vs floor median {statistics.median(rate):.2f}; "
            f"p99 vs floor's median {statistics.median(late):.2f} "
            f"(p99 median {statistics.median(p99):.1f} ms {[round(p) for p in p99]}); "
            f"statements per timer median {statistics.median(statements):.4f}, "
            f"worst {max(statements):.4f}"
        )
    return report


if __name__ == "__main__":
    lines = []
    for number, name in enumerate(sys.argv[1:]):
        with open(name, encoding="utf-8") as results:
            for line in results:
                if line.strip():
                    lines.append(json.dumps({**json.loads(line), "set": number}))
    print("\n".join(summary(lines)))
