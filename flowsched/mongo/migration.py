"""Internal: give a route to items stored before routing (``flowsched timers migrate``).

Versions before routing stored no ``route`` field, and no node claims a document without
one (claims read one ``route`` index range per route served). :func:`add_routes` sets it
(and :func:`add_buckets` the ``bucket`` of the shard key, which those versions had neither):

* a flow domain's timer (kind in ``flow_kinds``, ``payload.flow`` naming its flow) is
  addressed to that flow's handler (``handler: "flow:<Flow>"``, ``route: "h:flow:<Flow>"``),
  as the domain addresses the timers it schedules now;
* any other item keeps being routed by its kind (``route: "k:<KIND>"``).

Dead letters of flow timers get the flow's handler too, so that a requeued one reaches its
flow. Every update matches only documents still without a route: running it again changes
nothing, and running it while nodes sweep is safe (an item claimed meanwhile keeps its new
route through its settlement).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flowsched.limits import check_handler_name
from flowsched.routes import kind_route, name_route

if TYPE_CHECKING:
    from flowsched.mongo.store import TimerStore

__all__ = [
    "MigrationReport",
    "add_buckets",
    "add_routes",
    "legacy_index",
    "warn_unrouted",
]

log = logging.getLogger("flowsched.mongo")

UNROUTED: dict[str, Any] = {"route": None}
"""Documents without a route (``null`` matches a missing field too)."""


@dataclass(slots=True)
class MigrationReport:
    """What :func:`add_routes` changed."""

    routed: dict[str, int] = field(default_factory=dict)
    """Documents given a route, by route."""
    dead_letters: int = 0
    """Dead letters of flow timers given their flow's handler."""
    left: int = 0
    """Documents still without a route (their kind is not even a string: see quarantine)."""
    bucketed: int = 0
    """Documents given their bucket (stored before buckets)."""
    dropped_legacy_index: bool = False

    @property
    def total(self) -> int:
        return sum(self.routed.values())


def add_routes(
    store: TimerStore,
    flow_kinds: Collection[str],
    flow_handler: Callable[[str], str],
    *,
    drop_legacy_index: bool = False,
) -> MigrationReport:
    """Set ``route`` on every item document without one (see the module docstring)."""
    report = MigrationReport()
    items = store.items
    kinds = {"kind": {"$in": sorted(flow_kinds)}}
    for flow in sorted(f for f in items.distinct("payload.flow", {**UNROUTED, **kinds}) if f):
        handler = _flow_handler(flow, flow_handler)
        if handler is None:
            continue  # not a flow name a domain could register: routed by kind below
        query = {**UNROUTED, **kinds, "payload.flow": flow}
        changes = {"route": name_route(handler), "handler": handler}
        _count(report, name_route(handler), items.update_many(query, {"$set": changes}))
    for kind in sorted(k for k in items.distinct("kind", UNROUTED) if isinstance(k, str)):
        route = kind_route(kind)
        _count(
            report, route, items.update_many({**UNROUTED, "kind": kind}, {"$set": {"route": route}})
        )
    report.left = int(items.count_documents(UNROUTED))
    report.bucketed = add_buckets(store)
    dead_query = {"handler": None, **kinds}
    for flow in sorted(f for f in store.dead.distinct("payload.flow", dead_query) if f):
        handler = _flow_handler(flow, flow_handler)
        if handler is not None:
            query = {**dead_query, "payload.flow": flow}
            result = store.dead.update_many(query, {"$set": {"handler": handler}})
            report.dead_letters += int(result.modified_count)
    if drop_legacy_index and legacy_index(store):
        from flowsched.mongo.store import LEGACY_CLAIM_INDEX

        items.drop_index(LEGACY_CLAIM_INDEX)
        report.dropped_legacy_index = True
    return report


def add_buckets(store: TimerStore) -> int:
    """Set ``bucket`` (the shard key's first field) on every item document without one;
    how many. One ``update_many`` with a single bucket, else one update per document."""
    from flowsched.mongo.store import Write

    unbucketed = {"bucket": None}
    if store.buckets == 1:
        return int(store.items.update_many(unbucketed, {"$set": {"bucket": 0}}).modified_count)
    ids = [doc["_id"] for doc in store.items.find(unbucketed, {"_id": 1})]
    writes = [
        Write({"_id": item_id, **unbucketed}, {"$set": {"bucket": store.bucket(item_id)}})
        for item_id in ids
    ]
    return store.write(store.items, writes)


def legacy_index(store: TimerStore) -> bool:
    """Whether the collection still has the claim index of versions before routing."""
    from flowsched.mongo.store import LEGACY_CLAIM_INDEX

    info = store.items.index_information().get(LEGACY_CLAIM_INDEX)
    return info is not None and [key for key, _ in info.get("key", [])] == ["kind", "ready_at"]


def _flow_handler(flow: object, flow_handler: Callable[[str], str]) -> str | None:
    if not isinstance(flow, str):
        return None
    try:
        return check_handler_name(flow_handler(flow))
    except ValueError:
        return None


def _count(report: MigrationReport, route: str, result: Any) -> None:
    modified = int(result.modified_count)
    if modified:
        report.routed[route] = report.routed.get(route, 0) + modified


def warn_unrouted(store: Any) -> bool:
    """Log one warning if the items collection of ``store`` (a MongoDB timer store) holds
    items stored before routing (one ``find_one``, served by the claim index); whether it
    found any."""
    items = store.collection
    try:
        found = items.find_one({"route": None}, {"_id": 1})
    except Exception as exc:
        log.debug("%s: could not look for items without a route: %s", items.full_name, exc)
        return False
    if found is None:
        return False
    log.warning(
        "%s holds items stored before routing (no 'route' field, e.g. %r): no node claims "
        "them until you run `flowsched timers migrate --db %s --collection %s`",
        items.full_name,
        found.get("_id"),
        items.database.name,
        items.name,
    )
    return True
