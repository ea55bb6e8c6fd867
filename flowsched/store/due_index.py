"""Internal: the indexes that make :class:`~flowsched.store.MemoryTimerStore` fast - a heap
of due times with lazy deletion, items set aside by route, and the ids of each flow.

The heap holds entries ``(due, generation, id)``. Replacing, cancelling, moving, claiming or
pausing an item leaves its entry in the heap; the store drops an entry that no longer
stands for a claimable form when it reaches the top (lazy deletion). So that memory follows
the *live* timers (not every timer cancelled or replaced before its due time), the store
rebuilds the heap - O(n) - whenever it holds more than twice as many entries as there are
items (and more than :data:`COMPACT_AT`): amortised O(1) per write. Generations are unique
within a store, so heap order is ``(due, generation)``: same due, schedule order.

Heap entries hold no object the garbage collector tracks (CPython untracks such tuples), so
a million pending timers cost the collector one object each (the item), not two.

An entry met at the top whose route no caller serves is *parked* under its route, once, and
put back when a caller asks for that route: a node does not look at it on every wake-up.

Not thread-safe: the store calls it under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from heapq import heapify, heappop, heappush

from flowsched.records import ScheduleItem

__all__ = ["COMPACT_AT", "DueIndex", "Entry"]

COMPACT_AT = 1024
"""The heap is not rebuilt below this many entries (cheap to keep, costly to rebuild often)."""

Entry = tuple[datetime, int, str]
"""A heap entry: ``(due, generation, id)``."""

Live = Callable[[Entry], ScheduleItem | None]
"""The item an entry stands for, if it is still claimable (the store's judgement)."""

log = logging.getLogger("flowsched.memory")

_SMALL_FLOW = 16


class DueIndex:
    """The due-time heap, the parked entries by route, and the ids of each flow."""

    __slots__ = ("flows", "heap", "parked")

    def __init__(self) -> None:
        self.heap: list[Entry] = []
        self.parked: dict[str, list[Entry]] = {}
        # flow id -> ids of its items, so that removing a flow does not scan every item: a
        # tuple while there are few (a flow instance has a handful: 64 bytes, a set 216), a
        # set past _SMALL_FLOW (so that adding and removing stay O(1) for big flows).
        self.flows: dict[str, tuple[str, ...] | set[str]] = {}

    def pop_due(
        self, now: datetime, routes: Collection[str], limit: int, live: Live
    ) -> list[ScheduleItem]:
        """Take up to ``limit`` entries due by ``now`` off the heap: the claimable items of
        ``routes`` (``live``) among them, in due order; those of other routes are parked."""
        heap, found = self.heap, list[ScheduleItem]()
        while heap and heap[0][0] <= now and len(found) < limit:
            entry = heappop(heap)
            item = live(entry)
            if item is None:
                continue  # replaced, cancelled, moved, claimed or paused since
            if item.route not in routes:
                self.park(item, entry)
                continue
            found.append(item)
        return found

    def head(self, routes: Collection[str], live: Live) -> datetime | None:
        """The due time of the earliest claimable item of ``routes`` (stale entries at the
        top are dropped, those of other routes parked)."""
        heap = self.heap
        while heap:
            entry = heap[0]
            item = live(entry)
            if item is not None and item.route in routes:
                return entry[0]
            heappop(heap)
            if item is not None:
                self.park(item, entry)
        return None

    def push(self, item: ScheduleItem) -> None:
        heappush(self.heap, (item.due, item.generation, item.id))

    def park(self, item: ScheduleItem, entry: Entry) -> None:
        """Set ``entry`` aside until a caller serves ``item``'s route."""
        self.parked.setdefault(item.route, []).append(entry)
        log.info(
            "no handler for route %s here: %s waits until one is registered",
            item.route,
            item.id,
            extra={"item_id": item.id, "kind": item.kind.value, "route": item.route},
        )

    def unpark(self, routes: Collection[str]) -> None:
        """Put back the parked entries of ``routes``."""
        for route in [route for route in self.parked if route in routes]:
            for entry in self.parked.pop(route):
                heappush(self.heap, entry)

    def rebuild(self, live: Iterable[Entry]) -> None:
        """Replace the heap with ``live`` (every claimable form) and forget the parked."""
        heap = list(live)
        heapify(heap)
        self.heap[:] = heap
        self.parked.clear()

    def add_flow(self, flow_id: str, key: str) -> None:
        ids = self.flows.get(flow_id)
        if ids is None:
            self.flows[flow_id] = (key,)
        elif isinstance(ids, tuple):
            if key not in ids:
                self.flows[flow_id] = (*ids, key) if len(ids) < _SMALL_FLOW else {*ids, key}
        else:
            ids.add(key)

    def drop_flow(self, flow_id: str, key: str) -> None:
        ids = self.flows.get(flow_id)
        if isinstance(ids, tuple):
            if key in ids:
                if len(ids) == 1:
                    del self.flows[flow_id]
                else:
                    self.flows[flow_id] = tuple(i for i in ids if i != key)
        elif ids is not None:
            ids.discard(key)
            if not ids:
                del self.flows[flow_id]

    def take_flow(self, flow_id: str) -> list[str]:
        """The ids of ``flow_id``, sorted, forgotten here."""
        return sorted(self.flows.pop(flow_id, ()))
