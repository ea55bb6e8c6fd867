"""Internal: how ``flowsched timers quarantined`` shows quarantine records.

A record is what the scheduler moved aside from the timers collection because it could not
use it (see :mod:`flowsched.mongo.quarantine`): the original ``document`` (whole, trimmed of
fields too large to keep, or - when the server refused even that - only a marker), the
``reason``, the ``node`` that moved it and when.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from flowsched.cli.timers_render import ERROR_WIDTH, iso, plain

__all__ = ["quarantine_json", "quarantine_table"]

Doc = Mapping[str, Any]


def _kept(record: Doc) -> str:
    if record.get("not_kept"):
        return "marker only"
    trimmed = record.get("trimmed")
    if trimmed:
        return "trimmed: " + ", ".join(map(str, trimmed))
    return "whole"


def _when(value: object) -> str:
    return iso(value) if isinstance(value, datetime) else str(plain(value))


def quarantine_json(record: Doc) -> dict[str, Any]:
    """One quarantine record as JSON (the original document included, as kept)."""
    return {
        "record": plain(record.get("_id")),
        "item_id": plain(record.get("item_id")),
        "reason": plain(record.get("reason")),
        "node": plain(record.get("node")),
        "quarantined_at": _when(record.get("quarantined_at")),
        "kept": _kept(record),
        "document": plain(record.get("document")),
    }


def quarantine_table(records: Sequence[Doc]) -> Table:
    """item id, reason (cut to :data:`ERROR_WIDTH`), node, when, what was kept."""
    table = Table()
    for column in ("item id", "reason", "node", "quarantined at (UTC)", "kept"):
        table.add_column(column)
    for record in records:
        data = quarantine_json(record)
        item_id = repr(data["item_id"]) if not isinstance(data["item_id"], str) else data["item_id"]
        reason = " ".join(str(data["reason"]).split())
        if len(reason) > ERROR_WIDTH:
            reason = reason[: ERROR_WIDTH - 1] + "…"
        if len(item_id) > ERROR_WIDTH:
            item_id = item_id[: ERROR_WIDTH - 1] + "…"
        row = [item_id, reason, str(data["node"]), data["quarantined_at"], data["kept"]]
        table.add_row(*(Text(cell) for cell in row))
    return table
