"""Internal: the console's reads as data: query strings, filters, keyset pages, pipelines.

Nothing here touches a driver: every function turns validated input into a MongoDB filter,
sort, index hint or aggregation pipeline that :mod:`flowsched.console.source` runs with the
async driver. Bad input raises :class:`BadQuery` (a ``ValueError`` naming the parameter and
what would be valid): the pages answer it with a 400, never a 500 or a scan of everything.

Pages never ``skip``: the timers list walks the ``(due, _id)`` index (:data:`DUE_INDEX`) from
the last row shown (a keyset cursor, ``after``), or backwards from the first (``before``), so
page 1,000 costs what page 1 costs and stays stable while timers fire and vanish.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flowsched.console.pipelines import (
    failures_pipeline,
    forecast_pipeline,
    lateness_pipeline,
    slots,
)
from flowsched.mongo.inspection import overdue_query
from flowsched.port import ScheduleKind

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_TEXT",
    "STATES",
    "BadQuery",
    "Params",
    "check_text",
    "FindSpec",
    "PageQuery",
    "TimerQuery",
    "keyset",
    "parse_time",
    "failures_pipeline",
    "forecast_pipeline",
    "lateness_pipeline",
    "slots",
    "prefix_range",
]

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_TEXT = 200
"""Longest id, flow, handler or cursor text accepted (a handler name is at most 200 too)."""

ID_INDEX = "_id_"
CLAIM_INDEX = "claim_by_route_bucket"
DEAD_INDEX = "dead_at"
DUE_INDEX = "due_id"
"""The index of the timers list's order, ``(due, _id)`` (made by the console if missing)."""
DUE_KEYS = [("due", 1), ("_id", 1)]

STATES: Mapping[str, str] = {
    "waiting": "not due yet, nobody holds it",
    "overdue": "due, and nobody is delivering it",
    "running": "a node holds it with a live lease",
    "stale": "claimed, but the lease ran out (its node died or was cut off)",
    "retrying": "failed at least once",
}
"""The ``state`` filter's values and what each means."""

_TOP = "\U0010ffff"  # the highest code point: sorts after every string it follows


class BadQuery(ValueError):
    """A query parameter the console cannot use; the message names it and what is valid."""


@dataclass(frozen=True, slots=True)
class FindSpec:
    """One indexed ``find``: filter, sort, the index to walk, and how many rows."""

    filter: dict[str, Any]
    sort: list[tuple[str, int]]
    hint: str | None
    """The index to walk (``None``: the server's choice, for the small audit collection)."""
    limit: int

    def cursor_of(self, document: Mapping[str, Any]) -> str:
        """The ``after`` value that continues after ``document`` in this order."""
        return encode_cursor([document.get(name) for name, _ in self.sort])


def prefix_range(prefix: str) -> dict[str, str]:
    """The range of strings starting with ``prefix`` (one index range, unlike a regex)."""
    return {"$gte": prefix, "$lt": prefix + _TOP}


def encode_cursor(values: Sequence[object]) -> str:
    """An opaque, URL-safe keyset cursor of sort values: text, whole numbers and ObjectIds
    (ids a program or a person stored), times as ISO text."""
    raw = json.dumps([_plain(v) for v in values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _plain(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str) or type(value) is int:
        return value
    if type(value).__name__ == "ObjectId":
        return {"oid": str(value)}
    return str(value)  # cannot be a sort value we continue after: the next page restarts


def decode_cursor(text: str, size: int) -> list[object]:
    """The ``size`` values of a cursor made by :func:`encode_cursor`; :class:`BadQuery` if not."""
    if len(text) > 4 * MAX_TEXT:
        raise BadQuery(f"after: cursor longer than {4 * MAX_TEXT} characters")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise BadQuery(f"after: {text[:40]!r} is not a cursor from a page's 'next' link") from None
    if not isinstance(values, list) or len(values) != size:
        raise BadQuery(f"after: {text[:40]!r} is not a cursor from a page's 'next' link")
    return [_value(v, text) for v in values]


def _value(value: object, text: str) -> object:
    if value is None:
        return value
    if type(value) is int:
        if not -(2**63) <= value < 2**63:
            raise BadQuery(f"after: {text[:40]!r} holds a number too large for a cursor")
        return value
    if isinstance(value, str):
        return check_text("after", value)
    if isinstance(value, dict) and list(value) == ["oid"] and isinstance(value["oid"], str):
        from bson import ObjectId
        from bson.errors import InvalidId

        try:
            return ObjectId(value["oid"])
        except InvalidId:
            pass
    raise BadQuery(f"after: {text[:40]!r} is not a cursor from a page's 'next' link")


class Params:
    """A query string's parameters: each known name at most once, no others."""

    def __init__(self, items: Sequence[tuple[str, str]], known: Sequence[str]) -> None:
        self.values: dict[str, str] = {}
        for name, value in items:
            if name not in known:
                raise BadQuery(f"unknown parameter {name[:40]!r} (known: {', '.join(known)})")
            if name in self.values:
                raise BadQuery(f"{name}: given more than once")
            self.values[name] = value

    def text(self, name: str) -> str | None:
        value = self.values.get(name, "")
        return check_text(name, value) if value != "" else None

    def limit(self) -> int:
        raw = self.values.get("limit", "")
        if raw == "":
            return DEFAULT_LIMIT
        if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
            raise BadQuery(f"limit: {raw[:40]!r} is not a whole number from 1 to {MAX_LIMIT}")
        return int(raw)


def check_text(name: str, value: str) -> str:
    if len(value) > MAX_TEXT:
        raise BadQuery(f"{name}: longer than {MAX_TEXT} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadQuery(f"{name}: not valid text (a lone surrogate)") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise BadQuery(f"{name}: control characters are not allowed")
    return value


def parse_time(name: str, value: str | None) -> datetime | None:
    """An ISO 8601 time as UTC (no zone: UTC); :class:`BadQuery` naming ``name`` if it is
    none, or falls outside what UTC and BSON can hold (years 1 to 9999 after the offset)."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise BadQuery(
            f"{name}: {value[:40]!r} is not an ISO 8601 time (e.g. 2026-03-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC)
    except (OverflowError, ValueError):
        raise BadQuery(f"{name}: {value[:40]!r} is outside the years 1 to 9999 in UTC") from None


@dataclass(frozen=True, slots=True)
class TimerQuery:
    """The timers page's filters (all optional; every given one must hold) and its page.

    Pages are in ``(due, _id)`` order (soonest due first), walking the due index: ``after``
    continues after a row, ``before`` goes back from one (the previous page)."""

    id_prefix: str | None = None
    flow_prefix: str | None = None
    kind: ScheduleKind | None = None
    handler: str | None = None
    due_from: datetime | None = None
    due_to: datetime | None = None
    state: str | None = None
    after: str | None = None
    limit: int = DEFAULT_LIMIT
    before: str | None = None

    PARAMS = (
        "id", "flow", "kind", "handler", "due_from", "due_to", "state", "after", "before",
        "limit",
    )  # fmt: skip
    FILTERS = ("id", "flow", "kind", "handler", "due_from", "due_to", "state")
    SORT = (("due", 1), ("_id", 1))

    @classmethod
    def parse(cls, items: Sequence[tuple[str, str]]) -> TimerQuery:
        """From a query string's ``(name, value)`` pairs; :class:`BadQuery` names a bad one."""
        params = Params(items, cls.PARAMS)
        kind_text = params.text("kind")
        kind = None
        if kind_text is not None:
            try:
                kind = ScheduleKind(kind_text.upper())
            except ValueError:
                valid = ", ".join(k.value for k in ScheduleKind)
                raise BadQuery(f"kind: {kind_text[:40]!r} is not one of {valid}") from None
        state = params.text("state")
        if state is not None and state not in STATES:
            raise BadQuery(f"state: {state[:40]!r} is not one of {', '.join(STATES)}")
        due_from = parse_time("due_from", params.text("due_from"))
        due_to = parse_time("due_to", params.text("due_to"))
        if due_from is not None and due_to is not None and due_from >= due_to:
            raise BadQuery("due_from must be before due_to")
        query = cls(
            params.text("id"),
            params.text("flow"),
            kind,
            params.text("handler"),
            due_from,
            due_to,
            state,
            params.text("after"),
            params.limit(),
            params.text("before"),
        )
        if query.after is not None and query.before is not None:
            raise BadQuery("after and before: give one of them (a page's next or previous link)")
        query.position()  # checks the cursor before any round trip
        return query

    def position(self) -> tuple[list[object], bool] | None:
        """The cursor's ``(due, _id)`` and whether it goes back (``before``); ``None``: first
        page."""
        text = self.after if self.after is not None else self.before
        if text is None:
            return None
        due, key = decode_cursor(text, 2)
        when = parse_time("after", due if isinstance(due, str) else None)
        if when is None:
            raise BadQuery("after: not a cursor from a page's 'next' or 'previous' link")
        return [when, key], self.before is not None

    def cursor_of(self, document: Mapping[str, Any]) -> str:
        """The ``after`` (or ``before``) value of ``document`` in this page's order."""
        return encode_cursor([document.get("due"), document.get("_id")])

    def filter(self, now: datetime) -> dict[str, Any]:
        """Every filter of the page but its cursor (what a count or a bulk action matches)."""
        return _all(self._conditions(now))

    def find(self, now: datetime, hint: str | None = DUE_INDEX) -> FindSpec:
        """The indexed ``find`` of this page at ``now`` (``now`` matters for ``state``): in
        ``(due, _id)`` order, or backwards from ``before`` (reverse the rows found)."""
        conditions = self._conditions(now)
        position = self.position()
        sort = list(self.SORT)
        if position is not None:
            values, back = position
            if back:
                sort = [(name, -1) for name, _ in sort]
            conditions.append(keyset(sort, values))
        return FindSpec(_all(conditions), sort, hint, self.limit)

    def _conditions(self, now: datetime) -> list[dict[str, Any]]:
        conditions: list[dict[str, Any]] = []
        if self.id_prefix is not None:
            conditions.append({"_id": prefix_range(self.id_prefix)})
        if self.flow_prefix is not None:
            conditions.append({"flow_id": prefix_range(self.flow_prefix)})
        if self.kind is not None:
            conditions.append({"kind": self.kind.value})
        if self.handler is not None:
            conditions.append({"handler": self.handler})
        due: dict[str, datetime] = {}
        if self.due_from is not None:
            due["$gte"] = self.due_from
        if self.due_to is not None:
            due["$lt"] = self.due_to
        if due:
            conditions.append({"due": due})
        if self.state is not None:
            conditions.append(state_query(self.state, now))
        return conditions

    def describe(self) -> str:
        """The filters in words, for a preview and the audit (``every timer`` if none)."""
        parts = [f"{name}={value}" for name, value in self.link(after=None, limit=None)]
        return ", ".join(parts) if parts else "every timer"

    def link(self, **changes: str | None) -> list[tuple[str, str]]:
        """This query's parameters (for links), with ``changes`` applied (None: left out)."""
        values: dict[str, str | None] = {
            "id": self.id_prefix,
            "flow": self.flow_prefix,
            "kind": self.kind.value if self.kind else None,
            "handler": self.handler,
            "due_from": self.due_from.isoformat() if self.due_from else None,
            "due_to": self.due_to.isoformat() if self.due_to else None,
            "state": self.state,
            "limit": str(self.limit) if self.limit != DEFAULT_LIMIT else None,
            "after": self.after,
            "before": self.before,
        }
        if "after" in changes or "before" in changes:
            values["after"] = values["before"] = None
        values.update(changes)
        return [(name, value) for name, value in values.items() if value is not None]


@dataclass(frozen=True, slots=True)
class PageQuery:
    """A plain keyset page (dead letters, quarantine): ``after`` and ``limit`` only."""

    after: str | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def parse(cls, items: Sequence[tuple[str, str]]) -> PageQuery:
        """From a query string's pairs; :class:`BadQuery` names a bad one."""
        params = Params(items, ("after", "limit"))
        query = cls(params.text("after"), params.limit())
        if query.after is not None:
            decode_cursor(query.after, 2)
        return query

    def find(self, sort_field: str, hint: str) -> FindSpec:
        """The page in ``(sort_field, _id)`` order, walking index ``hint``."""
        sort = [(sort_field, 1), ("_id", 1)] if sort_field != "_id" else [("_id", 1)]
        conditions: list[dict[str, Any]] = []
        if self.after is not None:
            values = decode_cursor(self.after, 2)[: len(sort)]
            if sort_field != "_id":
                values[0] = parse_time("after", values[0] if isinstance(values[0], str) else None)
            conditions.append(after_query(sort, values))
        return FindSpec(_all(conditions), sort, hint, self.limit)

    def cursor_of(self, spec: FindSpec, document: Mapping[str, Any]) -> str:
        """The ``after`` value continuing after ``document`` (always two values)."""
        values = [document.get(name) for name, _ in spec.sort]
        return encode_cursor(([*values, None])[:2])


def state_query(state: str, now: datetime) -> dict[str, Any]:
    """The filter of one of :data:`STATES` at ``now``."""
    claimed: dict[str, Any] = {"claim": {"$ne": None}}
    if state == "waiting":
        return {"claim": None, "ready_at": {"$gt": now}}
    if state == "overdue":
        return overdue_query(now)
    if state == "running":
        return {**claimed, "claim.lease_until": {"$gt": now}}
    if state == "stale":
        return {**claimed, "claim.lease_until": {"$lte": now}}
    if state == "retrying":
        return {"attempts": {"$gt": 0}}
    raise BadQuery(f"state: {state!r} is not one of {', '.join(STATES)}")


def keyset(sort: Sequence[tuple[str, int]], values: Sequence[object]) -> dict[str, Any]:
    """Documents after ``values`` in the order ``sort`` (two fields, each way)."""
    (first, way), (second, _) = sort[0], sort[1]
    beyond = "$gt" if way == 1 else "$lt"
    return {"$or": [{first: {beyond: values[0]}}, {first: values[0], second: {beyond: values[1]}}]}


def after_query(sort: Sequence[tuple[str, int]], values: Sequence[object]) -> dict[str, Any]:
    """Documents after ``values`` in the ascending order ``sort`` (the keyset condition)."""
    (first, _), *rest = sort
    if not rest:
        return {first: {"$gt": values[0]}}
    (second, _) = rest[0]
    return {"$or": [{first: {"$gt": values[0]}}, {first: values[0], second: {"$gt": values[1]}}]}


def _all(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    if not conditions:
        return {}
    return conditions[0] if len(conditions) == 1 else {"$and": conditions}
