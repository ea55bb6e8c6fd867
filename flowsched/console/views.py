"""Internal: what the templates show: rows of timers and dead letters, node states, chart bars.

The text comes from the CLI's renderers (:mod:`flowsched.cli.timers_render`), so a timer reads
the same in ``flowsched timers show`` and on its console page. Templates escape every value
(Jinja autoescape): nothing here builds HTML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowsched.cli.quarantine_render import quarantine_json
from flowsched.cli.timers_render import dead_letter_json, iso, plain, timer_fields, timer_json
from flowsched.port import route_target

__all__ = [
    "Bar",
    "Chart",
    "chart",
    "dead_row",
    "node_row",
    "quarantine_row",
    "route_rows",
    "timer_detail",
    "timer_row",
]

Doc = Mapping[str, Any]

CHART_WIDTH = 720
CHART_HEIGHT = 140


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its slot start, count, and place in the SVG."""

    label: str
    count: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class Chart:
    """Bars over a common scale, with the figures a reader needs beside them."""

    bars: tuple[Bar, ...]
    peak: int
    total: int
    outside: int
    """Items beyond the chart's range (later than 24 h; due before the last hour)."""
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


def chart(starts: Sequence[datetime], counts: Mapping[datetime, int], outside: int) -> Chart:
    """A bar chart of ``counts`` over slots ``starts`` (missing slots count 0)."""
    values = [counts.get(start, 0) for start in starts]
    peak = max(values, default=0)
    step = CHART_WIDTH / max(1, len(starts))
    bars = []
    for n, (start, count) in enumerate(zip(starts, values, strict=True)):
        height = 0.0 if peak == 0 else (CHART_HEIGHT - 4) * count / peak
        bars.append(
            Bar(
                iso(start),
                count,
                round(n * step, 2),
                round(CHART_HEIGHT - height, 2),
                round(max(step - 1, 0.5), 2),
                round(height, 2),
            )
        )
    return Chart(tuple(bars), peak, sum(values), outside)


def _state(data: Mapping[str, Any]) -> str:
    claim = data.get("claim")
    if claim is not None:
        return f"held by {claim['owner']}" if claim["live"] else f"stale claim of {claim['owner']}"
    if data.get("overdue"):
        return "overdue"
    return "retrying" if data.get("attempts") else "waiting"


def timer_row(doc: Doc, now: datetime) -> dict[str, Any]:
    """One line of the timers list."""
    data = timer_json(doc, now)
    if "malformed" in data:
        return {"id": str(data["id"]), "malformed": data["malformed"]}
    return {
        "id": data["id"],
        "kind": data["kind"],
        "handler": data["handler"] or "-",
        "due": data["due"],
        "flow": data["flow_id"] or "-",
        "attempts": data["attempts"],
        "state": _state(data),
        "last_error": (data["last_error"] or "")[:80],
    }


def timer_detail(doc: Doc, now: datetime) -> dict[str, Any]:
    """A timer's page: its field rows, and what the actions need (generation, recurring)."""
    data = timer_json(doc, now)
    generation = doc.get("generation")
    return {
        "fields": timer_fields(doc, now),
        "generation": generation if isinstance(generation, int) else None,
        "recurring": doc.get("recurrence") is not None,
        "claimed": doc.get("claim") is not None,
        "malformed": data.get("malformed"),
    }


def dead_row(doc: Doc) -> dict[str, Any]:
    """One line of the dead letters list (with what a requeue needs)."""
    data = dead_letter_json(doc)
    generation = doc.get("generation")
    return {
        "id": str(plain(doc.get("_id"))),
        "generation": generation if isinstance(generation, int) else None,
        "kind": str(data.get("kind", "-")),
        "handler": str(data.get("handler") or "-"),
        "attempts": data.get("attempts", "-"),
        "error": str(data.get("error") or data.get("malformed") or "-"),
        "dead_at": str(data.get("dead_at", "-")),
        "flow": str(data.get("flow_id") or "-"),
        "malformed": data.get("malformed"),
    }


def quarantine_row(record: Doc) -> dict[str, Any]:
    """One quarantined record: why, when, by whom, and the document as kept (JSON text)."""
    data = quarantine_json(record)
    document = json.dumps(data.pop("document"), indent=2, sort_keys=True, ensure_ascii=False)
    return {**{k: str(v) for k, v in data.items()}, "document": document}


def node_row(doc: Doc, now: datetime) -> dict[str, Any]:
    """A heartbeat: node id, routes, when renewed, and whether it is still live."""
    expires = doc.get("expires_at")
    routes = doc.get("routes")
    return {
        "id": str(plain(doc.get("_id"))),
        "routes": [str(r) for r in routes] if isinstance(routes, list) else [],
        "renewed_at": iso(doc["renewed_at"])
        if isinstance(doc.get("renewed_at"), datetime)
        else "-",
        "expires_at": iso(expires) if isinstance(expires, datetime) else "-",
        "live": isinstance(expires, datetime) and _aware(expires) > now,
    }


def _aware(when: datetime) -> datetime:
    from datetime import UTC

    return when if when.tzinfo else when.replace(tzinfo=UTC)


def route_rows(groups: Sequence[Doc], nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pending items per route, with the live nodes serving each (by route; none last)."""
    live = [node for node in nodes if node["live"]]
    rows = []
    for group in groups:
        route = group.get("_id") if isinstance(group.get("_id"), str) else None
        handler, kind = route_target(route)
        oldest = group.get("oldest")
        rows.append(
            {
                "route": route or "none (stored before routing)",
                "target": f"handler {handler}" if handler else f"kind {kind}" if kind else "-",
                "pending": int(group.get("n", 0)),
                "oldest": iso(oldest) if isinstance(oldest, datetime) else "-",
                "retrying": int(group.get("retrying", 0)),
                "failures": int(group.get("failures", 0)),
                "served_by": [n["id"] for n in live if route is not None and route in n["routes"]],
            }
        )
    return sorted(rows, key=lambda r: (r["route"].startswith("none"), r["route"]))


def dead_groups(groups: Sequence[Doc]) -> list[dict[str, Any]]:
    """Dead letters per handler (kind for kind-routed ones), most first."""
    rows = []
    for group in groups:
        found = group.get("_id")
        key: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        handler, kind = key.get("handler"), key.get("kind")
        name = f"handler {handler}" if handler else f"kind {kind}"
        rows.append({"name": name, "dead": int(group.get("n", 0))})
    return sorted(rows, key=lambda r: (-r["dead"], r["name"]))
