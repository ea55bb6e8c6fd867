"""Internal: the console's audit: who did or tried what, from where, and how it ended.

Every sign-in, sign-out, refusal (wrong secret, throttled, CSRF, role, read-only), action
and failed action is one entry: ``at``, ``who`` (the identity the server established, never
a name typed in a form; ``None`` when nobody was established), ``role``, ``client`` (the
connection's address, or ``X-Forwarded-For`` from a trusted proxy only), ``action``,
``item_id`` (one timer) or ``ids`` and ``count`` (a bulk action), ``what`` (the filter of a
bulk action, the refused request), ``done`` and ``outcome`` (a sentence).

:class:`MongoAudit` keeps them in ``<collection>_audit``; :class:`MemoryAudit` in memory (the
last :data:`MEMORY_LIMIT`). Both list them newest first, filtered by :class:`AuditQuery`.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowsched.console.driver import AsyncCollection
from flowsched.console.queries import (
    DEFAULT_LIMIT,
    BadQuery,
    FindSpec,
    Params,
    decode_cursor,
    encode_cursor,
    parse_time,
)
from flowsched.mongo.documents import truncate_ms

__all__ = ["AUDIT_LIMIT", "MAX_IDS", "AuditQuery", "MemoryAudit", "MongoAudit", "entry"]

AUDIT_LIMIT = 50
"""Most audit entries shown on a timer's page (newest first)."""
MAX_IDS = 50_000
"""Most ids one bulk entry lists (its ``count`` is the whole number)."""
OUTCOMES = ("done", "refused")


def entry(
    now: datetime,
    action: str,
    who: Any,
    client: str,
    done: bool,
    outcome: str,
    *,
    item_id: str | None = None,
    ids: Sequence[str] | None = None,
    what: str | None = None,
) -> dict[str, Any]:
    """One audit entry (``who``: an :class:`~flowsched.console.identity.Identity` or None)."""
    record: dict[str, Any] = {
        "at": truncate_ms(now),
        "who": getattr(who, "name", None),
        "role": getattr(who, "role", None),
        "client": client,
        "action": action,
        "item_id": item_id,
        "done": done,
        "outcome": outcome[:500],
    }
    if ids is not None:
        record["ids"] = list(ids[:MAX_IDS])
        record["count"] = len(ids)
    if what is not None:
        record["what"] = what[:500]
    return record


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """The ``/audit`` page's filters: who, action, outcome, item id, a time window; paged
    newest first (``after``: the cursor of the last entry shown)."""

    who: str | None = None
    action: str | None = None
    outcome: str | None = None
    item_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    after: str | None = None
    limit: int = DEFAULT_LIMIT

    PARAMS = ("who", "action", "outcome", "item_id", "since", "until", "after", "limit")

    @classmethod
    def parse(cls, items: Sequence[tuple[str, str]]) -> AuditQuery:
        """From a query string's pairs; :class:`BadQuery` names a bad one."""
        params = Params(items, cls.PARAMS)
        outcome = params.text("outcome")
        if outcome is not None and outcome not in OUTCOMES:
            raise BadQuery(f"outcome: {outcome[:40]!r} is not one of {', '.join(OUTCOMES)}")
        query = cls(
            params.text("who"),
            params.text("action"),
            outcome,
            params.text("item_id"),
            parse_time("since", params.text("since")),
            parse_time("until", params.text("until")),
            params.text("after"),
            params.limit(),
        )
        if query.after is not None:
            query.position()
        return query

    def position(self) -> tuple[datetime, object] | None:
        """The ``(at, _id)`` the page continues after, or ``None`` on the first page."""
        if self.after is None:
            return None
        at, key = decode_cursor(self.after, 2)
        when = parse_time("after", at if isinstance(at, str) else None)
        if when is None:
            raise BadQuery("after: not a cursor from the audit page's 'next' link")
        return when, key

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` passes every filter (the in-memory twin of :meth:`filter`)."""
        at = record["at"]
        return all(
            (
                self.who is None or record.get("who") == self.who,
                self.action is None or record.get("action") == self.action,
                self.outcome is None or record.get("done") == (self.outcome == "done"),
                self.item_id is None
                or record.get("item_id") == self.item_id
                or self.item_id in record.get("ids", ()),
                self.since is None or at >= self.since,
                self.until is None or at < self.until,
            )
        )

    def filter(self) -> dict[str, Any]:
        """The MongoDB filter of this page."""
        conditions: list[dict[str, Any]] = []
        for field, value in (("who", self.who), ("action", self.action)):
            if value is not None:
                conditions.append({field: value})
        if self.outcome is not None:
            conditions.append({"done": self.outcome == "done"})
        if self.item_id is not None:
            conditions.append({"$or": [{"item_id": self.item_id}, {"ids": self.item_id}]})
        window: dict[str, datetime] = {}
        if self.since is not None:
            window["$gte"] = self.since
        if self.until is not None:
            window["$lt"] = self.until
        if window:
            conditions.append({"at": window})
        position = self.position()
        if position is not None:
            at, key = position
            conditions.append({"$or": [{"at": {"$lt": at}}, {"at": at, "_id": {"$lt": key}}]})
        return {"$and": conditions} if conditions else {}

    def link(self, **changes: str | None) -> list[tuple[str, str]]:
        """This query's parameters (for links), with ``changes`` applied (None: left out)."""
        values: dict[str, str | None] = {
            "who": self.who,
            "action": self.action,
            "outcome": self.outcome,
            "item_id": self.item_id,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "limit": str(self.limit) if self.limit != DEFAULT_LIMIT else None,
            "after": self.after,
        }
        values.update(changes)
        return [(name, value) for name, value in values.items() if value is not None]


def cursor_of(record: Mapping[str, Any]) -> str:
    """The ``after`` value that continues after ``record`` (newest first)."""
    return encode_cursor([record.get("at"), record.get("_id")])


class MongoAudit:
    """The audit in ``<collection>_audit`` (indexes made on the first entry)."""

    def __init__(self, collection: AsyncCollection) -> None:
        self._collection = collection
        self._indexed = False

    async def record(self, record: Mapping[str, Any]) -> None:
        """Store ``record`` (one insert)."""
        if not self._indexed:
            await self._collection.create_index([("item_id", 1), ("at", -1)], "item_at")
            await self._collection.create_index([("at", -1), ("_id", -1)], "at_id")
            self._indexed = True
        await self._collection.insert_one(dict(record))

    async def find(self, query: AuditQuery) -> list[Any]:
        """One page of entries, newest first."""
        spec = FindSpec(query.filter(), [("at", -1), ("_id", -1)], None, query.limit)
        return await self._collection.find(spec)

    async def of_item(self, item_id: str) -> list[Any]:
        """The newest entries naming ``item_id``."""
        return await self.find(AuditQuery(item_id=item_id, limit=AUDIT_LIMIT))


class MemoryAudit:
    """The audit kept in this process (the last :data:`MEMORY_LIMIT` entries)."""

    MEMORY_LIMIT = 10_000

    def __init__(self) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=self.MEMORY_LIMIT)
        self._numbers = itertools.count(1)

    async def record(self, record: Mapping[str, Any]) -> None:
        """Keep ``record`` (numbered in ``_id``)."""
        self._entries.append({**record, "_id": next(self._numbers)})

    async def find(self, query: AuditQuery) -> list[Any]:
        """One page of entries, newest first."""
        position = query.position()
        found = []
        for record in reversed(self._entries):
            if position is not None and (record["at"], record["_id"]) >= position:
                continue
            if query.matches(record):
                found.append(record)
                if len(found) == query.limit:
                    break
        return found

    async def of_item(self, item_id: str) -> list[Any]:
        """The newest entries naming ``item_id``."""
        return await self.find(AuditQuery(item_id=item_id, limit=AUDIT_LIMIT))
