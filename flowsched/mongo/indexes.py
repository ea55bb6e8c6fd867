"""Internal: the indexes of a MongoDB timer collection and its companions, and the bucket
count the first node recorded.

* ``items``: ``(route, bucket, ready_at)`` for claims, ``(due, _id)`` for ``timers()``
  pages, a sparse ``flow_id`` for ``cancel_flow``;
* ``<name>_dead``: ``dead_at`` and ``(due, _id)``; ``<name>_history``: a TTL on
  ``expires_at``.

:meth:`~flowsched.mongo.store.MongoCollections.ensure_indexes` runs :func:`index_steps` once
per process, after checking the bucket count.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.errors import OperationFailure

from flowsched.mongo.commands import Call, Steps

__all__ = [
    "CLAIM_INDEX",
    "CLAIM_INDEX_KEYS",
    "DUE_INDEX",
    "DUE_INDEX_KEYS",
    "LEGACY_CLAIM_INDEX",
    "index_steps",
    "recorded_buckets",
]

DUE_INDEX = "due_id"
DUE_INDEX_KEYS = [("due", ASCENDING), ("_id", ASCENDING)]
"""The index ``timers()`` pages through (items and dead letters)."""

CLAIM_INDEX = "claim_by_route_bucket"
CLAIM_INDEX_KEYS = [("route", ASCENDING), ("bucket", ASCENDING), ("ready_at", ASCENDING)]
LEGACY_CLAIM_INDEX = "claim"
"""The claim index of versions before routing: ``(kind, ready_at)``."""


def recorded_buckets(collection: Collection[Any]) -> int | None:
    """The bucket count the nodes of ``collection`` use, as the first of them recorded it in
    ``<name>_settings`` (``None``: none recorded yet). One round trip."""
    settings = collection.database[f"{collection.name}_settings"]
    recorded = settings.find_one({"_id": "buckets"})
    value = None if recorded is None else recorded.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def index_steps() -> Steps[None]:
    """Create every index (idempotent on the server; the old ``flow_id`` one is dropped)."""
    # (route, bucket, ready_at): the sweep asks, per route and bucket it serves, for
    # ready_at <= now sorted by ready_at - one index range each; other routes are
    # never read.
    yield Call("items", "create_index", (CLAIM_INDEX_KEYS,), {"name": CLAIM_INDEX})
    # Sparse: an item without a flow (the field is left out) costs no entry here, so
    # claiming and settling it maintains one index less. Replaces the full index of
    # earlier versions ("flow_id"), dropped once.
    flow_index = ([("flow_id", ASCENDING)],)
    yield Call("items", "create_index", flow_index, {"name": "flow_id_sparse", "sparse": True})
    with contextlib.suppress(OperationFailure):  # not there: new, or dropped already
        yield Call("items", "drop_index", ("flow_id",))
    yield Call("dead", "create_index", ([("dead_at", ASCENDING)],), {"name": "dead_at"})
    # (due, _id): timers() pages, soonest due first, by keyset (flowsched.mongo.timer_query).
    # Claims and lease renewals never change due: only schedule and settle maintain it.
    yield Call("items", "create_index", (DUE_INDEX_KEYS,), {"name": DUE_INDEX})
    yield Call("dead", "create_index", (DUE_INDEX_KEYS,), {"name": DUE_INDEX})
    # Delivery history (flowsched.mongo.history): removed once expires_at has passed.
    ttl = {"name": "history_ttl", "expireAfterSeconds": 0}
    yield Call("history", "create_index", ([("expires_at", ASCENDING)],), ttl)
