"""Internal: what the templates show: rows of timers and dead letters, node states, chart bars.

The text comes from the CLI's renderers (:mod:`flowsched.cli.timers_render`), so a timer reads
the same in ``flowsched timers show`` and on its console page. Templates escape every value
(Jinja autoescape): nothing here builds HTML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowsched.cli.quarantine_render import quarantine_json
from flowsched.cli.timers_render import dead_letter_json, iso, plain, timer_fields, timer_json
from flowsched.mongo.documents import bson_utc
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
AXIS = 22
TICKS = 6


def human(value: timedelta | float | None) -> str:
    """A duration in the unit a person reads: ``506 ms``, ``4.2 s``, ``3 min``,
    ``2 h 5 min``, ``3 d 4 h`` (a number is seconds; ``None`` is ``-``)."""
    if value is None:
        return "-"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    seconds = abs(seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{round(seconds)} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def relative(due: datetime, now: datetime) -> str:
    """``3 min late`` or ``in 2 h`` (human units)."""
    return f"{human(now - due)} late" if due < now else f"in {human(due - now)}"


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its slot, count, place in the SVG, and the list of what it counts."""

    label: str
    count: int
    x: float
    y: float
    width: float
    height: float
    due_from: str = ""
    due_to: str = ""


@dataclass(frozen=True, slots=True)
class Tick:
    """A label on the time axis."""

    x: float
    text: str


@dataclass(frozen=True, slots=True)
class Chart:
    """Bars over a common scale, with the figures a reader needs beside them."""

    bars: tuple[Bar, ...]
    peak: int
    total: int
    outside: int
    """Items beyond the chart's range (later than 24 h; due before the last hour)."""
    ticks: tuple[Tick, ...] = ()
    step: str = ""
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT
    axis: int = AXIS


def chart(
    starts: Sequence[datetime],
    counts: Mapping[datetime, int],
    outside: int,
    step: timedelta | None = None,
) -> Chart:
    """A bar chart of ``counts`` over slots ``starts``, merged into bars of ``step`` (fewer,
    wider bars), each linking to the timers due in it; a time axis of :data:`TICKS` labels."""
    if not starts:
        return Chart((), 0, 0, outside)
    slot = starts[1] - starts[0] if len(starts) > 1 else timedelta(hours=1)
    step = max(step or slot, slot)
    groups: list[tuple[datetime, int]] = []
    for start in starts:
        count = counts.get(start, 0)
        if groups and start - groups[-1][0] < step:
            groups[-1] = (groups[-1][0], groups[-1][1] + count)
        else:
            groups.append((start, count))
    peak = max((c for _, c in groups), default=0)
    width = CHART_WIDTH / len(groups)
    bars = []
    for n, (start, count) in enumerate(groups):
        height = 0.0 if peak == 0 else (CHART_HEIGHT - 4) * count / peak
        end = groups[n + 1][0] if n + 1 < len(groups) else start + step
        bars.append(
            Bar(
                f"{start:%H:%M} to {end:%H:%M} UTC",
                count,
                round(n * width, 2),
                round(CHART_HEIGHT - height, 2),
                round(max(width - 1, 0.5), 2),
                round(height, 2),
                start.isoformat(),
                end.isoformat(),
            )
        )
    every = max(1, len(groups) // TICKS)
    ticks = tuple(
        Tick(round(n * width, 2), f"{start:%H:%M}")
        for n, (start, _) in enumerate(groups)
        if n % every == 0 and n * width < CHART_WIDTH - 36  # room for the label
    )
    total = sum(c for _, c in groups)
    return Chart(tuple(bars), peak, total, outside, ticks, human(step))


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
        "when": relative(bson_utc(doc["due"]), now) if isinstance(doc.get("due"), datetime) else "",
        "flow": data["flow_id"] or "-",
        "attempts": data["attempts"],
        "state": _state(data),
        "last_error": (data["last_error"] or "")[:80],
    }


def timer_detail(doc: Doc, now: datetime, hide_payloads: bool = False) -> dict[str, Any]:
    """A timer's page: its field rows (durations in human units; the payload as its size when
    ``hide_payloads``), and what the actions need (generation, recurring, the claim's owner)."""
    data = timer_json(doc, now)
    generation = doc.get("generation")
    due = doc.get("due")
    fields = []
    for name, value in timer_fields(doc, now):
        if name == "due" and isinstance(due, datetime) and "malformed" not in data:
            value = f"{data['due']} ({relative(bson_utc(due), now)})"
        elif name == "payload" and hide_payloads:
            value = payload_size(doc.get("payload"))
        fields.append((name, value))
    claim = data.get("claim")
    return {
        "fields": fields,
        "generation": generation if isinstance(generation, int) else None,
        "recurring": doc.get("recurrence") is not None,
        "claimed": claim is not None,
        "owner": claim["owner"] if isinstance(claim, dict) else None,
        "malformed": data.get("malformed"),
    }


def payload_size(payload: object) -> str:
    """A payload as its size only (``--hide-payloads``)."""
    if payload is None:
        return "none"
    size = len(json.dumps(plain(payload), separators=(",", ":")).encode())
    return f"{size} bytes (hidden)"


def dead_detail(doc: Doc, hide_payloads: bool = False) -> dict[str, Any]:
    """A dead letter's page: its row, and its payload (or size) as indented JSON."""
    row = dead_row(doc)
    payload = doc.get("payload")
    if hide_payloads:
        row["payload"] = payload_size(payload)
    else:
        row["payload"] = json.dumps(plain(payload), indent=2, sort_keys=True, ensure_ascii=False)
    return row


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
        "live": isinstance(expires, datetime) and bson_utc(expires) > now,
    }


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
        link = {"handler": handler} if handler else {"kind": kind}
        rows.append({"name": name, "dead": int(group.get("n", 0)), "link": link})
    return sorted(rows, key=lambda r: (-r["dead"], r["name"]))
