"""Internal: how ``flowsched timers show`` prints an item's delivery history.

One row per attempt, oldest first: when it started (and how long it ran), the node, the
outcome and the error; under the table, the traceback excerpt of the latest failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from flowsched.cli._output import console
from flowsched.cli.timers_render import Doc, iso, timer_fields, timer_json
from flowsched.steering import Attempt

__all__ = ["history_json", "history_table", "last_traceback", "show_json", "show_text"]


def _iso(when: datetime | None) -> str | None:
    return None if when is None else iso(when)


def history_json(attempts: Sequence[Attempt]) -> list[dict[str, Any]]:
    """The attempts as JSON objects (the ``history`` field of ``timers show --json``)."""
    return [
        {
            "node": a.node,
            "started": _iso(a.started),
            "ended": _iso(a.ended),
            "outcome": a.outcome,
            "attempt": a.attempt,
            "error_type": a.error_type,
            "error_message": a.error_message,
            "traceback": a.traceback,
        }
        for a in attempts
    ]


def history_table(attempts: Sequence[Attempt], now: datetime) -> Table:
    """One row per attempt: started, took, node, outcome, error."""
    table = Table("#", "started", "took", "node", "outcome", "error", title="history")
    for a in attempts:
        took = (a.ended or now) - a.started
        seconds = f"{took.total_seconds():.3f}s" + ("" if a.ended else " so far")
        error = ""
        if a.error_type or a.error_message:
            error = ": ".join(p for p in (a.error_type, a.error_message) if p)
        table.add_row(
            str(a.attempt),
            iso(a.started),
            seconds,
            a.node,
            a.outcome or "running",
            error,
        )
    return table


def last_traceback(attempts: Sequence[Attempt]) -> str | None:
    """The traceback excerpt of the latest attempt that has one."""
    for a in reversed(attempts):
        if a.traceback:
            return a.traceback
    return None


def show_json(
    item_id: str, document: Doc | None, attempts: Sequence[Attempt], now: datetime
) -> dict[str, Any]:
    """``timers show --json``: the timer's fields (none once it is gone) and ``history``."""
    found = {} if document is None else timer_json(document, now)
    return {**found, "id": item_id, "history": history_json(attempts)}


def show_text(
    heading: str, document: Doc | None, attempts: Sequence[Attempt], now: datetime
) -> None:
    """``timers show``: the timer's fields (or that it is gone), then its history."""
    out = console()
    out.print(Text(heading))
    if document is None:
        out.print(Text("no longer scheduled (completed, cancelled or dead-lettered)"))
    else:
        table = Table("field", "value")
        for name, value in timer_fields(document, now):
            table.add_row(name, Text(value))
        out.print(table)
    if not attempts:
        out.print(Text("no attempts recorded"))
        return
    out.print(history_table(attempts, now))
    if (excerpt := last_traceback(attempts)) is not None:
        out.print(Text(f"latest traceback (excerpt):\n{excerpt}"))
