"""Internal: read-only queries for operators — pages of timers and dead letters, counts.

Used by ``flowsched timers``; the scheduler never calls them. Documents are read back with the
scheduler's own model (:func:`~flowsched.mongo.documents.stored_item`,
:func:`~flowsched.mongo.documents.dead_letter_from_document`); what this module adds is which
fields to filter and sort on. Nothing here writes: cancel and requeue go through
:class:`~flowsched.mongo.MongoScheduler`, with the scheduler's own fencing.

Pages are sorted by a date field and then ``_id``, so that the order is total and a page can
continue after a given id (keyset paging: stable while timers fire and vanish meanwhile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flowsched.mongo.documents import PAUSED_PREFIX, StoredItem, bson_utc_or_none, stored_item
from flowsched.mongo.nodes import NodeInfo, live_nodes
from flowsched.records import ScheduleKind
from flowsched.routes import route_target

if TYPE_CHECKING:
    from flowsched.mongo.store import Doc, TimerStore
else:
    Doc = Mapping[str, Any]

__all__ = [
    "KNOWN_FIELDS",
    "ClaimInfo",
    "Page",
    "Pager",
    "RouteStats",
    "Stats",
    "TimerFilter",
    "TimerView",
    "claim_of",
    "collect_stats",
    "overdue_query",
    "route_pipeline",
    "timer_view",
]

KNOWN_FIELDS = frozenset(
    {
        "_id", "kind", "route", "handler", "due", "flow_id", "payload", "generation",
        "attempts", "deliveries", "last_error", "ready_at", "claim",
    }
)  # fmt: skip
"""The fields of an item document this version reads; others are shown as they are."""


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """A node's claim on a document: who holds it and until when (``None``: unreadable)."""

    owner: str
    lease_until: datetime | None

    def live(self, now: datetime) -> bool:
        """Whether the lease still runs at ``now`` (the holder is delivering it)."""
        return self.lease_until is not None and self.lease_until > now


@dataclass(frozen=True, slots=True)
class TimerView:
    """One item's document as an operator sees it: the item and everything stored beside it."""

    stored: StoredItem
    claim: ClaimInfo | None
    last_error: str | None
    ready_at: datetime | None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fields this version does not read (from a newer version, or written by hand)."""


def claim_of(doc: Doc) -> ClaimInfo | None:
    """The claim stored in ``doc`` (even in a document that is otherwise malformed)."""
    claim = doc.get("claim")
    if not isinstance(claim, Mapping):
        return None
    return ClaimInfo(str(claim.get("owner")), bson_utc_or_none(claim.get("lease_until")))


def timer_view(doc: Doc) -> TimerView:
    """Read ``doc``; :class:`~flowsched.mongo.documents.MalformedDocument` if it is not an item."""
    stored = stored_item(doc)
    last_error = doc.get("last_error")
    return TimerView(
        stored,
        claim_of(doc),
        last_error if isinstance(last_error, str) else None,
        bson_utc_or_none(doc.get("ready_at")),
        {name: value for name, value in doc.items() if name not in KNOWN_FIELDS},
    )


def overdue_query(now: datetime) -> dict[str, Any]:
    """Items due before ``now`` that nobody is delivering (no claim, or its lease ran out).

    ``ready_at`` is ``due`` while unclaimed and the lease's end while claimed, so
    ``ready_at <= now`` excludes exactly the items a live node holds."""
    return {"due": {"$lt": now}, "ready_at": {"$lte": now}}


@dataclass(frozen=True, slots=True)
class TimerFilter:
    """Which documents to list; every given condition must hold."""

    kind: ScheduleKind | None = None
    flow_id: str | None = None
    overdue_at: datetime | None = None
    """Only items overdue at this time (see :func:`overdue_query`)."""

    def query(self) -> dict[str, Any]:
        """The MongoDB filter."""
        query: dict[str, Any] = {}
        if self.kind is not None:
            query["kind"] = self.kind.value
        if self.flow_id is not None:
            query["flow_id"] = self.flow_id
        if self.overdue_at is not None:
            query.update(overdue_query(self.overdue_at))
        return query


@dataclass(frozen=True, slots=True)
class Page:
    """Documents ``first`` .. ``first + len(documents) - 1`` (1-based) of ``total`` matching."""

    documents: list[Doc]
    total: int
    first: int

    @property
    def last(self) -> int:
        """Position of the last document shown (``first - 1`` when the page is empty)."""
        return self.first + len(self.documents) - 1

    @property
    def more(self) -> bool:
        """Whether documents follow this page."""
        return self.last < self.total


class Pager:
    """Pages of one collection in ``(sort_field, _id)`` order."""

    def __init__(self, collection: Any, sort_field: str) -> None:
        self.collection = collection
        self.sort_field = sort_field

    def page(self, query: Mapping[str, Any], number: int, size: int) -> Page:
        """Page ``number`` (1-based) of ``size`` documents."""
        skip = (number - 1) * size
        total = int(self.collection.count_documents(dict(query)))
        documents = self._find(dict(query), size, skip)
        return Page(documents, total, skip + 1)

    def after(self, query: Mapping[str, Any], cursor_id: str, size: int) -> Page | None:
        """The ``size`` documents following ``cursor_id``; ``None`` if that id is not stored."""
        cursor = self.collection.find_one({"_id": cursor_id}, {self.sort_field: 1})
        if cursor is None:
            return None
        value = cursor.get(self.sort_field)
        before = self._beside(value, "$lt", cursor_id, "$lte")
        following = self._beside(value, "$gt", cursor_id, "$gt")
        total = int(self.collection.count_documents(dict(query)))
        shown = int(self.collection.count_documents({"$and": [dict(query), before]}))
        documents = self._find({"$and": [dict(query), following]}, size)
        return Page(documents, total, shown + 1)

    def _beside(self, value: object, order: str, cursor_id: str, tie: str) -> dict[str, Any]:
        # Documents on one side of the cursor in (sort_field, _id) order.
        name = self.sort_field
        return {"$or": [{name: {order: value}}, {name: value, "_id": {tie: cursor_id}}]}

    def _find(self, query: dict[str, Any], size: int, skip: int = 0) -> list[Doc]:
        cursor = self.collection.find(query).sort([(self.sort_field, 1), ("_id", 1)])
        return list(cursor.skip(skip).limit(size))


@dataclass(frozen=True, slots=True)
class RouteStats:
    """The items of one route (``None``: stored before routing) and the live nodes that
    serve it."""

    route: str | None
    pending: int
    oldest_due: datetime | None
    served_by: tuple[str, ...]

    @property
    def handler(self) -> str | None:
        """The handler name of an ``h:`` route."""
        return route_target(self.route)[0]

    @property
    def kind(self) -> str | None:
        """The kind of a ``k:`` route."""
        return route_target(self.route)[1]

    @property
    def served(self) -> bool:
        return bool(self.served_by)


@dataclass(frozen=True, slots=True)
class Stats:
    """A namespace at one moment (counts are read one after another, not as one snapshot)."""

    now: datetime
    pending: dict[str, int]
    """Scheduled items by kind (as stored: a malformed kind is counted under its own name)."""
    overdue: int
    oldest_overdue: Doc | None
    in_flight: int
    """Items a node holds with a live lease (being delivered)."""
    stale_claims: int
    """Claimed items whose lease ran out (their node died or was cut off): redelivered soon."""
    dead_letters: int
    quarantined: int
    routes: tuple[RouteStats, ...] = ()
    """Pending items by route, with the live nodes serving each (by route; no route last)."""
    nodes: tuple[NodeInfo, ...] = ()
    """Nodes whose heartbeat is live at ``now``."""

    @property
    def unserved(self) -> tuple[RouteStats, ...]:
        """Routes with pending items that no live node serves (a paused timer's route,
        ``paused:<route>``, is served by nobody on purpose: not counted)."""
        return tuple(
            r for r in self.routes if not r.served and not (r.route or "").startswith(PAUSED_PREFIX)
        )


def collect_stats(store: TimerStore, now: datetime) -> Stats:
    """Count ``store``'s namespace at ``now`` (nine round trips)."""
    items = store.items
    groups = items.aggregate([{"$group": {"_id": "$kind", "n": {"$sum": 1}}}])
    pending = {str(group["_id"]): int(group["n"]) for group in groups}
    nodes = tuple(live_nodes(store.nodes, now))
    overdue = overdue_query(now)
    oldest = list(items.find(overdue).sort([("due", 1), ("_id", 1)]).limit(1))
    claimed = {"claim": {"$ne": None}}
    return Stats(
        now=now,
        pending=dict(sorted(pending.items())),
        overdue=int(items.count_documents(overdue)),
        oldest_overdue=oldest[0] if oldest else None,
        in_flight=int(items.count_documents({**claimed, "claim.lease_until": {"$gt": now}})),
        stale_claims=int(items.count_documents({**claimed, "claim.lease_until": {"$lte": now}})),
        dead_letters=int(store.dead.count_documents({})),
        quarantined=int(store.quarantine.count_documents({})),
        routes=route_stats(items, nodes),
        nodes=nodes,
    )


def route_pipeline() -> list[dict[str, Any]]:
    """Pending items per route, one ``$group``: count ``n``, ``oldest`` due, how many are
    ``retrying`` (failed at least once) and their ``failures`` (``timers stats`` and the
    console's overview both run it)."""
    retrying = {"$cond": [{"$gt": ["$attempts", 0]}, 1, 0]}
    group = {
        "_id": "$route",
        "n": {"$sum": 1},
        "oldest": {"$min": "$due"},
        "retrying": {"$sum": retrying},
        "failures": {"$sum": "$attempts"},
    }
    return [{"$group": group}]


def route_stats(items: Any, nodes: tuple[NodeInfo, ...]) -> tuple[RouteStats, ...]:
    """Pending items by route (one aggregation), with the ``nodes`` serving each."""
    groups = items.aggregate(route_pipeline())
    merged: dict[str | None, tuple[int, datetime | None]] = {}
    for group in groups:
        # A route that is not text (a poison document) counts with the route-less ones.
        route = group["_id"] if isinstance(group["_id"], str) else None
        count, oldest = merged.get(route, (0, None))
        first = bson_utc_or_none(group.get("oldest"))
        if oldest is None or (first is not None and first < oldest):
            oldest = first
        merged[route] = (count + int(group["n"]), oldest)
    found = [
        RouteStats(route, count, oldest, tuple(n.node_id for n in nodes if route in n.routes))
        for route, (count, oldest) in merged.items()
    ]
    return tuple(sorted(found, key=lambda r: (r.route is None, r.route or "")))
