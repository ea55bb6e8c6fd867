"""Internal: how ``flowsched timers`` shows documents — tables, JSON, page footers, stats.

Pure functions of the documents read and of ``now``: no I/O here. Times are UTC ISO 8601
with milliseconds (BSON precision) and a ``Z``. A malformed document is shown with the reason
the scheduler would quarantine it for, never hidden and never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.table import Table
from rich.text import Text

from flowsched.cli._output import human
from flowsched.mongo.documents import MalformedDocument, bson_utc, dead_letter_from_document
from flowsched.mongo.inspection import RouteStats, Stats, TimerView, timer_view
from flowsched.mongo.nodes import NodeInfo, live_nodes
from flowsched.recurrence import Recurrence

__all__ = [
    "dead_letter_json",
    "dead_letters_table",
    "iso",
    "plain",
    "route_lines",
    "stats_json",
    "stats_lines",
    "timer_fields",
    "timer_json",
    "timers_table",
]

Doc = Mapping[str, Any]
ERROR_WIDTH = 80
"""Errors longer than this are cut in tables (``show`` and ``--json`` give them whole)."""


def iso(when: datetime | None) -> str:
    """``2026-03-01T12:00:00.000Z``; ``-`` for none."""
    if when is None:
        return "-"
    when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def plain(value: Any) -> Any:
    """``value`` as JSON-able data: dates as ISO text, other BSON types as text."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _relative(due: datetime, now: datetime) -> str:
    # Whole seconds: an operator does not need the milliseconds of "how late".
    gap = abs(due - now)
    if gap >= timedelta(seconds=1):
        gap = timedelta(seconds=gap // timedelta(seconds=1))
    return f"{human(gap)} late" if due < now else f"in {human(gap)}"


def recurrence_text(value: object) -> str | None:
    """``every 1h`` or ``cron 0 2 * * * Europe/London`` for a stored recurrence; else None."""
    if not isinstance(value, Mapping):
        return None
    try:
        recurrence = Recurrence.from_json(dict(value))
    except ValueError:
        return f"unreadable: {json.dumps(plain(value))}"
    if recurrence.interval is not None:
        return f"every {human(recurrence.interval)}{recurrence.ends_text()}"
    return f"cron {recurrence.cron_expr} {recurrence.timezone}{recurrence.ends_text()}"


def _view(doc: Doc) -> TimerView | str:
    try:
        return timer_view(doc)
    except MalformedDocument as exc:
        return exc.reason


def _claim_text(view: TimerView, now: datetime) -> str:
    claim = view.claim
    if claim is None:
        return "-"
    if claim.live(now):
        return f"{claim.owner} until {iso(claim.lease_until)}"
    return f"{claim.owner}, lease ran out {iso(claim.lease_until)}"


# -- timers ------------------------------------------------------------------------------------


def timers_table(documents: Sequence[Doc], now: datetime) -> Table:
    """id, kind, due, flow, attempts, claim (and ``repeats`` when any item recurs)."""
    views = [(doc, _view(doc)) for doc in documents]
    recurring = any("recurrence" in doc for doc in documents)
    table = Table()
    columns = ["id", "kind", "due (UTC)", "flow", "attempts", "claimed by / lease"]
    for column in columns + (["repeats"] if recurring else []):
        table.add_column(column, justify="right" if column == "attempts" else "left")
    for doc, view in views:
        row = _timer_row(doc, view, now)
        if recurring:
            row.append(recurrence_text(doc.get("recurrence")) or "-")
        table.add_row(*(Text(cell) for cell in row))
    return table


def _timer_row(doc: Doc, view: TimerView | str, now: datetime) -> list[str]:
    if isinstance(view, str):
        return [str(doc.get("_id")), str(doc.get("kind")), "-", "-", "-", f"malformed: {view}"]
    item = view.stored.item
    due = iso(item.due)
    if view.extra.get("paused") is True:
        due += " (paused)"
    elif _overdue(view, now):
        due += " (overdue)"
    return [
        item.id,
        item.kind.value,
        due,
        item.flow_id or "-",
        str(view.stored.attempts),
        _claim_text(view, now),
    ]


def _deliveries(count: int) -> str:
    return f"{count} delivery" if count == 1 else f"{count} deliveries"


def _overdue(view: TimerView, now: datetime) -> bool:
    ready = view.ready_at if view.ready_at is not None else view.stored.item.due
    return view.stored.item.due < now and ready <= now


def timer_json(doc: Doc, now: datetime) -> dict[str, Any]:
    """Every field of one timer as JSON (a malformed one: its id, the reason, the document)."""
    view = _view(doc)
    if isinstance(view, str):
        return {"id": plain(doc.get("_id")), "malformed": view, "document": plain(doc)}
    item = view.stored.item
    claim = view.claim
    return {
        "id": item.id,
        "kind": item.kind.value,
        "handler": item.handler,
        "route": plain(doc.get("route")),
        "due": iso(item.due),
        "overdue": _overdue(view, now),
        "flow_id": item.flow_id,
        "payload": plain(item.payload),
        "generation": item.generation,
        "key": item.key,
        "attempts": view.stored.attempts,
        "deliveries": view.stored.deliveries,
        "last_error": view.last_error,
        "ready_at": iso(view.ready_at),
        "claim": None
        if claim is None
        else {"owner": claim.owner, "lease_until": iso(claim.lease_until), "live": claim.live(now)},
        "recurrence": plain(doc.get("recurrence")),
        "other_fields": plain({k: v for k, v in view.extra.items() if k != "recurrence"}),
    }


def timer_fields(doc: Doc, now: datetime) -> list[tuple[str, str]]:
    """``show``'s rows: (field, value) for every field, the payload as indented JSON."""
    data = timer_json(doc, now)
    if "malformed" in data:
        return [("id", str(data["id"])), ("malformed", data["malformed"])] + [
            (name, json.dumps(value)) for name, value in data["document"].items()
        ]
    view = _view(doc)
    assert not isinstance(view, str)
    rows = [
        ("id", data["id"]),
        ("kind", data["kind"]),
        ("handler", data["handler"] or "-"),
        ("route", data["route"] or "none (stored before routing: flowsched timers migrate)"),
        ("due", f"{data['due']} ({_relative(view.stored.item.due, now)})"),
        ("flow", data["flow_id"] or "-"),
        ("generation", str(data["generation"])),
        ("key", data["key"]),
        ("attempts", f"{data['attempts']} failed, {_deliveries(data['deliveries'])} started"),
        ("last error", data["last_error"] or "-"),
        ("claimed by / lease", _claim_text(view, now)),
        ("ready at", data["ready_at"]),
        ("payload", json.dumps(data["payload"], indent=2, sort_keys=True)),
    ]
    repeats = recurrence_text(doc.get("recurrence"))
    if repeats is not None:
        rows.append(("recurrence", repeats))
    rows += [(name, json.dumps(value)) for name, value in data["other_fields"].items()]
    return rows


# -- dead letters ------------------------------------------------------------------------------


def dead_letter_json(doc: Doc) -> dict[str, Any]:
    """One dead letter as JSON (a malformed one: its id, the reason, the document)."""
    try:
        dead = dead_letter_from_document(doc)
    except MalformedDocument as exc:
        return {"id": plain(doc.get("_id")), "malformed": exc.reason, "document": plain(doc)}
    item = dead.item
    return {
        "id": item.id,
        "kind": item.kind.value,
        "handler": item.handler,
        "due": iso(item.due),
        "flow_id": item.flow_id,
        "payload": plain(item.payload),
        "generation": item.generation,
        "attempts": dead.attempts,
        "error": dead.error,
        "dead_at": iso(dead.dead_at),
    }


def dead_letters_table(documents: Sequence[Doc]) -> Table:
    """id, kind, handler, attempts, error (cut to :data:`ERROR_WIDTH`), dead at, flow."""
    table = Table()
    for column in ("id", "kind", "handler", "attempts", "error", "dead at (UTC)", "flow"):
        table.add_column(column, justify="right" if column == "attempts" else "left")
    for doc in documents:
        data = dead_letter_json(doc)
        if "malformed" in data:
            row = [str(data["id"]), "-", "-", "-", f"malformed: {data['malformed']}", "-", "-"]
        else:
            error = " ".join(data["error"].split())
            if len(error) > ERROR_WIDTH:
                error = error[: ERROR_WIDTH - 1] + "…"
            row = [data["id"], data["kind"], data["handler"] or "-", str(data["attempts"])]
            row += [error, data["dead_at"], data["flow_id"] or "-"]
        table.add_row(*(Text(cell) for cell in row))
    return table


# -- stats --------------------------------------------------------------------------------


def stats_json(stats: Stats) -> dict[str, Any]:
    """The figures of ``timers stats`` as JSON."""
    oldest = stats.oldest_overdue
    return {
        "now": iso(stats.now),
        "pending": sum(stats.pending.values()),
        "pending_by_kind": dict(stats.pending),
        "overdue": stats.overdue,
        "oldest_overdue": None if oldest is None else _oldest(oldest, stats.now),
        "in_flight": stats.in_flight,
        "stale_claims": stats.stale_claims,
        "dead_letters": stats.dead_letters,
        "quarantined": stats.quarantined,
        "routes": [
            {
                "route": r.route,
                "handler": r.handler,
                "kind": r.kind,
                "pending": r.pending,
                "oldest_due": iso(r.oldest_due) if r.oldest_due else None,
                "served_by": list(r.served_by),
            }
            for r in stats.routes
        ],
        "unserved_routes": [r.route for r in stats.unserved],
        "nodes": [
            {"node": n.node_id, "routes": list(n.routes), "expires_at": plain(n.expires_at)}
            for n in stats.nodes
        ],
    }


def _oldest(doc: Doc, now: datetime) -> dict[str, Any]:
    due = doc.get("due")
    late = None
    if isinstance(due, datetime):
        due = bson_utc(due)
        late = (now - due).total_seconds()
    return {"id": plain(doc.get("_id")), "due": plain(due), "late_seconds": late}


def stats_lines(stats: Stats) -> list[str]:
    """The figures of ``timers stats`` for people, one a line."""
    data = stats_json(stats)
    kinds = ", ".join(f"{kind} {count}" for kind, count in stats.pending.items())
    lines = [f"pending       {data['pending']}" + (f"  ({kinds})" if kinds else "")]
    overdue = f"overdue       {stats.overdue}"
    oldest = data["oldest_overdue"]
    if oldest is not None:
        late = oldest["late_seconds"]
        how = human(timedelta(seconds=int(late))) + " late" if late is not None else "?"
        overdue += f"  (oldest: {oldest['id']}, due {oldest['due']}, {how})"
    lines.append(overdue)
    lines.append(f"in flight     {stats.in_flight}")
    if stats.stale_claims:
        lines.append(f"stale claims  {stats.stale_claims}  (lease ran out: redelivered soon)")
    lines.append(f"dead letters  {stats.dead_letters}")
    lines.append(f"quarantined   {stats.quarantined}")
    return lines + route_lines(stats)


def _route_name(route: RouteStats) -> str:
    if route.handler is not None:
        return f"handler {route.handler}"
    if route.kind is not None:
        return f"kind {route.kind}"
    return "no route" if route.route is None else str(route.route)


def route_lines(stats: Stats) -> list[str]:
    """Pending items by route (handler name or kind), which live nodes serve each, and
    the live nodes."""
    if not stats.routes:
        lines = []
    else:
        width = max(len(_route_name(r)) for r in stats.routes)
        lines = ["by route      (pending, oldest due, live nodes serving it)"]
        for r in stats.routes:
            if r.route is None:
                served = "NONE: stored before routing, run `flowsched timers migrate`"
            else:
                served = ", ".join(r.served_by) or "NONE: no live node serves it"
            oldest = iso(r.oldest_due)
            lines.append(f"  {_route_name(r):<{width}}  {r.pending:>6}  {oldest}  {served}")
    names = ", ".join(node.node_id for node in stats.nodes)
    lines.append(f"live nodes    {len(stats.nodes)}" + (f"  ({names})" if names else ""))
    unserved = len(stats.unserved)
    if unserved:
        lines.append(f"unserved      {unserved} route(s) with pending items and no live node")
    return lines


def offset_text(offset: timedelta | None) -> str:
    """A node's clock offset for people: ``+0.012s`` (``not measured`` when unknown)."""
    return "not measured" if offset is None else f"{offset.total_seconds():+.3f}s"


def node_json(node: NodeInfo) -> dict[str, Any]:
    """One live node for ``timers nodes --json``."""
    offset = node.clock_offset
    return {
        "node": node.node_id,
        "routes": list(node.routes),
        "renewed_at": plain(node.renewed_at),
        "expires_at": plain(node.expires_at),
        "clock_offset_seconds": None if offset is None else offset.total_seconds(),
    }


def nodes_lines(nodes: list[NodeInfo]) -> list[str]:
    """``timers nodes`` for people: one line per live node."""
    if not nodes:
        return ["no live node"]
    width = max(len(node.node_id) for node in nodes)
    lines = [f"{'node':<{width}}  {'clock offset':>12}  last heartbeat            routes"]
    for node in nodes:
        routes = ", ".join(node.routes) or "none"
        renewed = iso(node.renewed_at) if node.renewed_at else "?"
        offset = offset_text(node.clock_offset)
        lines.append(f"{node.node_id:<{width}}  {offset:>12}  {renewed:<24}  {routes}")
    return lines


def nodes_output(nodes: Any, now: datetime, heading: str, as_json: bool) -> list[str]:
    """``timers nodes``: the nodes live at ``now`` in the ``nodes`` collection, as JSON or
    under ``heading``, one a line."""
    found = live_nodes(nodes, now)
    if as_json:
        data = {"nodes": [node_json(node) for node in found]}
        return [json.dumps(data, indent=2, ensure_ascii=False)]
    return [heading, *nodes_lines(found)]
