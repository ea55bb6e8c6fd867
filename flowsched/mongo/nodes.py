"""Internal: node heartbeats — which live node serves which routes (for ``timers stats``).

Every started :class:`~flowsched.mongo.MongoScheduler` and
:class:`~flowsched.AsyncMongoScheduler` advertises itself in ``<collection>_nodes``, one
document per node (:func:`heartbeat_document`, one definition for both faces)::

    {_id: <node id>, routes: ["h:alpha", "k:TIMER", ...], renewed_at: <date>,
     expires_at: <date>, clock_offset_ms: <server time - node time, or null: not measured>}

The sweeper (the async node's firing task) renews it every poll (and at once when a handler
is subscribed or registered); it expires like a lease (``expires_at``, three polls and at
least :data:`MIN_TTL` ahead), so a node that died without closing drops out of the "live"
list by itself (a TTL index removes its document later). ``close()`` (``aclose()``) removes
it. Nothing here decides delivery: claims never read this
collection, it only tells operators which routes no live node serves.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowsched.clock import Clock, capped
from flowsched.mongo.commands import Call, Steps, drive
from flowsched.mongo.documents import bson_utc_or_none, truncate_ms
from flowsched.mongo.server_clock import ServerClock

__all__ = ["MIN_TTL", "Heartbeat", "NodeInfo", "heartbeat_document", "live_nodes", "node_ttl"]

log = logging.getLogger("flowsched.mongo")

_MS = timedelta(milliseconds=1)
_TTL = {"expireAfterSeconds": 0}

MIN_TTL = timedelta(seconds=5)
"""The shortest time a heartbeat is trusted for, whatever the poll interval."""


def node_ttl(poll_interval: timedelta) -> timedelta:
    """How long one heartbeat says a node is alive: three polls, at least :data:`MIN_TTL`."""
    return max(3 * poll_interval, MIN_TTL)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as its last heartbeat described it."""

    node_id: str
    routes: tuple[str, ...]
    renewed_at: datetime | None
    expires_at: datetime | None
    clock_offset: timedelta | None = None
    """The database's clock minus the node's, as it last measured (``None``: not measured)."""


class Heartbeat:
    """One node's advertisement in ``nodes`` (a collection), renewed with :meth:`beat`.

    Written once for both faces: each operation is a procedure (:mod:`flowsched.mongo.commands`:
    ``*_steps``, naming the ``nodes`` collection by role) that ``MongoScheduler`` runs with
    :meth:`beat_when_due`/:meth:`beat`/:meth:`remove` (plain pymongo calls) and
    ``AsyncMongoScheduler`` awaits with :func:`~flowsched.mongo.commands.drive_async` on its
    store."""

    def __init__(self, nodes: Any, node_id: str, ttl: timedelta) -> None:
        self.nodes = nodes
        self.node_id = node_id
        self.ttl = ttl
        self._advertised: frozenset[str] | None = None
        self._indexed = False
        self._failing = False
        self._tried = False  # a beat was sent (it may have been written, even if it failed)
        self._next_beat = 0.0  # monotonic seconds

    def collection(self, role: str) -> Any:
        """The collection of every operation here (``nodes``): the sync driver's view."""
        return self.nodes

    def beat_when_due(self, routes: frozenset[str], clock: Clock, poll: float) -> None:
        """:meth:`beat_when_due_steps`, synchronously."""
        drive(self.beat_when_due_steps(routes, clock, poll), self)

    def beat_when_due_steps(self, routes: frozenset[str], clock: Clock, poll: float) -> Steps[None]:
        """:meth:`beat_steps` if the routes changed or a beat is due: every ``poll`` seconds,
        and at least three times per ``ttl`` (no round trip otherwise)."""
        now = clock.monotonic()
        if now < self._next_beat and not self.changed(routes):
            return
        offset = clock.offset if isinstance(clock, ServerClock) and clock.measured else None
        yield from self.beat_steps(routes, clock.now(), offset)
        self._next_beat = now + min(poll, self.ttl.total_seconds() / 3)

    def changed(self, routes: frozenset[str]) -> bool:
        """Whether ``routes`` differ from what the last heartbeat advertised."""
        return routes != self._advertised

    def beat(self, routes: frozenset[str], now: datetime, offset: timedelta | None = None) -> None:
        """:meth:`beat_steps`, synchronously."""
        drive(self.beat_steps(routes, now, offset), self)

    def beat_steps(
        self, routes: frozenset[str], now: datetime, offset: timedelta | None = None
    ) -> Steps[None]:
        """Advertise ``routes`` until ``now + ttl`` (one upsert, after the TTL index the
        first time), with the node's clock ``offset`` (see
        :class:`~flowsched.mongo.server_clock.ServerClock`). Errors are logged, never
        raised: a missing heartbeat only makes ``timers stats`` report the routes unserved."""
        self._tried = True
        try:
            if not self._indexed:
                # Dead nodes' documents go away by themselves (MongoDB's TTL monitor).
                index = ([("expires_at", 1)],)
                yield Call("nodes", "create_index", index, {"name": "expires_at", **_TTL})
                self._indexed = True
            document = heartbeat_document(routes, now, self.ttl, offset)
            change = ({"_id": self.node_id}, {"$set": document})
            yield Call("nodes", "update_one", change, {"upsert": True})
        except Exception as exc:
            if not self._failing:
                log.warning("node %s: could not write its heartbeat: %s", self.node_id, exc)
            self._failing = True
            return
        self._failing = False
        self._advertised = routes

    def remove(self) -> None:
        """:meth:`remove_steps`, synchronously."""
        drive(self.remove_steps(), self)

    def remove_steps(self) -> Steps[None]:
        """Withdraw the advertisement (on close; no round trip if none was ever sent);
        errors are logged."""
        if not self._tried:
            return
        try:
            yield Call("nodes", "delete_one", ({"_id": self.node_id},))
        except Exception as exc:
            log.warning("node %s: could not remove its heartbeat: %s", self.node_id, exc)


def heartbeat_document(
    routes: frozenset[str], now: datetime, ttl: timedelta, offset: timedelta | None
) -> dict[str, Any]:
    """The fields one heartbeat sets (the node's ``_id`` aside)."""
    return {
        "routes": sorted(routes),
        "renewed_at": truncate_ms(now),
        "expires_at": truncate_ms(capped(now, ttl)),
        "clock_offset_ms": None if offset is None else round(offset / _MS, 1),
    }


def live_nodes(nodes: Any, now: datetime) -> list[NodeInfo]:
    """Nodes whose heartbeat has not expired at ``now``, by node id."""
    found = nodes.find({"expires_at": {"$gt": now}}).sort("_id", 1)
    return [_node(doc) for doc in found]


def _node(doc: Mapping[str, Any]) -> NodeInfo:
    routes = doc.get("routes")
    listed = tuple(str(r) for r in routes) if isinstance(routes, list) else ()
    stored = doc.get("clock_offset_ms")
    offset = None
    if isinstance(stored, int | float) and not isinstance(stored, bool):
        with contextlib.suppress(OverflowError, ValueError):  # inf, nan, 1e300: not known
            offset = timedelta(milliseconds=stored)
    return NodeInfo(
        str(doc.get("_id")),
        listed,
        _date(doc, "renewed_at"),
        _date(doc, "expires_at"),
        offset,
    )


def _date(doc: Mapping[str, Any], name: str) -> datetime | None:
    return bson_utc_or_none(doc.get(name))
