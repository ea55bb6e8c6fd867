"""Internal: which documents a claim looks at - the claim query, and where it stops.

A claim reads the first ``limit`` documents of the routes it serves that are ready by its
horizon, oldest ``ready_at`` first: one index range per route and bucket (index ``route,
bucket, ready_at``), merged. Documents of routes the node does not serve are never examined.

Where the query stops: at the horizon, except just after a full batch. Then it stops at a
*reach* - past the last batch's last ``ready_at`` by twice that batch's span, so about twice
``limit`` documents at the pace the burst is falling due - and only if that range holds
fewer than ``limit`` does a second query read on to the horizon. Every document older than
the reach is in range, so none is ever skipped or starved. Why: a server that reads every
match of an index range before applying the limit (the wire server does) would otherwise
pay for the whole backlog on every claim of a burst, so claims got dearer the further the
node fell behind. MongoDB stops at the limit either way; there the reach changes nothing
but the range's end.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING

from flowsched.mongo.commands import Find, Steps
from flowsched.mongo.documents import bson_utc
from flowsched.mongo.store import Doc, TimerStore

__all__ = ["CandidateQuery", "ready_key", "reach_after"]

_BY_READY = (("ready_at", ASCENDING),)


def ready_key(doc: Doc) -> datetime:
    """``ready_at`` to merge by; one that is not a date (a poison document) sorts first, so
    it is met - and quarantined - rather than skipped."""
    ready = doc.get("ready_at")
    return bson_utc(ready) if isinstance(ready, datetime) else datetime.min.replace(tzinfo=UTC)


def reach_after(found: Sequence[Doc], limit: int) -> datetime | None:
    """Where the next claim query may stop after the batch ``found``: past its last
    ``ready_at`` by twice its span; ``None`` (read to the horizon) unless the batch was full
    and spread over time (a batch due at one instant tells no pace)."""
    if len(found) < limit or limit < 2:
        return None
    first, last = ready_key(found[0]), ready_key(found[-1])
    return last + 2 * (last - first) if last > first else None


class CandidateQuery:
    """The claim query of one node (it remembers the reach of its last batch)."""

    def __init__(self, store: TimerStore) -> None:
        self.store = store
        self.reach: datetime | None = None
        """Where the next query stops (``None``: at the horizon)."""

    def steps(self, routes: Sequence[str], horizon: datetime, limit: int) -> Steps[list[Doc]]:
        """The first ``limit`` documents of ``routes`` ready by ``horizon``, oldest first
        (whole documents: when the claim wins them all, they are what it delivers)."""
        reach, self.reach = self.reach, None
        if reach is None or reach >= horizon:
            found = yield from self._ranges(routes, None, horizon, limit)
        else:
            found = yield from self._ranges(routes, None, reach, limit)
            if len(found) < limit:
                found += yield from self._ranges(routes, reach, horizon, limit - len(found))
        self.reach = reach_after(found, limit)
        return found

    def _ranges(
        self, routes: Sequence[str], after: datetime | None, upto: datetime, limit: int
    ) -> Steps[list[Doc]]:
        """Up to ``limit`` documents of ``routes`` with ``after < ready_at <= upto``, oldest
        first: one index range per route and bucket, merged."""
        ready: dict[str, Any] = {"$lte": upto}
        if after is not None:
            ready["$gt"] = after
        ranges: list[list[Doc]] = []
        for route in routes:
            for bucket in self.store.served:
                query = {"route": route, "bucket": bucket, "ready_at": ready}
                ranges.append((yield Find("items", query, sort=_BY_READY, limit=limit)))
        if len(ranges) == 1:
            return ranges[0]
        merged = heapq.merge(*ranges, key=ready_key)
        return list(itertools.islice(merged, limit))
