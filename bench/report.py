"""What the benchmarks share: the Markdown table of figures they print."""

from __future__ import annotations

from typing import Any


def print_table(rows: list[dict[str, Any]], peer: str) -> None:
    """Print ``rows`` (figure, flowsched, ``peer``, target, ok) as a Markdown table."""
    columns = ["figure", "flowsched", peer, "target", "ok"]
    cells = [
        [("yes" if row[c] else "NO") if c == "ok" else str(row[c]) for c in columns] for row in rows
    ]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        padded = (v.ljust(w) for v, w in zip(values, widths, strict=True))
        return "| " + " | ".join(padded) + " |"

    print(line(columns))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for values in cells:
        print(line(values))
