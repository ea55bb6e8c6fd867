"""Internal: in-memory timer storage — a heap by due time plus an id map, fenced by generation.

The id map holds the one *current* form of every scheduled id: a :class:`ScheduleItem`
carrying its generation (and, after a failure, its moved due time). The heap holds entries
``(due, generation, id)``; replacing or cancelling an item leaves its entry in the heap, and
an entry whose id no longer maps to an item of that generation and due time is dropped when
it reaches the top (lazy deletion). So that memory follows the *live* timers (not every
timer ever cancelled or replaced before its due time), the heap is compacted - stale entries
dropped, the rest re-heapified, O(n) - whenever it holds more than twice as many entries as
there are items (and more than :data:`COMPACT_AT`): amortised O(1) per write.

A delivery is handed a *claim*, ``(item, attempt)``. It is current while ``items[item.id] is
item``: every new form (a replacement, a redelivery) is a new object, so that identity check
is the fence (id + generation) a delivery passes right before its handler runs and again
before its outcome is applied. A stale delivery can never touch the form that replaced it.

Heap entries hold no object the garbage collector tracks (CPython untracks such tuples), so
a million pending timers cost the collector one object each (the item), not two.
Generations are unique within a store, so heap order is ``(due, generation)``: same due,
schedule order.

Not thread-safe: :class:`~flowsched.memory.InMemoryScheduler` calls every method under its
lock (except the lock-free reads it documents).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection
from datetime import datetime
from heapq import heapify, heappop, heappush

from flowsched.delivery import Completed, NextSlot, Outcome, Redeliver
from flowsched.records import DeadLetter, ScheduleItem, set_generation

__all__ = ["COMPACT_AT", "Claim", "TimerHeap"]

COMPACT_AT = 1024
"""The heap is not compacted below this many entries (cheap to keep, costly to rebuild often)."""

log = logging.getLogger("flowsched.memory")

_SMALL_FLOW = 16

Claim = tuple[ScheduleItem, int]
"""One delivery to make, ``(item, attempt)``; ``attempt`` counts earlier failed deliveries."""


class TimerHeap:
    """In-memory storage of timers: items by id, the due-time heap, parked items, dead letters."""

    __slots__ = (
        "attempts",
        "dead",
        "errors",
        "flows",
        "generations",
        "heap",
        "items",
        "parked",
        "paused",
    )

    def __init__(self) -> None:
        self.items: dict[str, ScheduleItem] = {}
        self.heap: list[tuple[datetime, int, str]] = []
        # Failed deliveries of the current form, for the ids that have any.
        self.attempts: dict[str, int] = {}
        # The latest failure's text of the current form (TimerInfo.last_error), for the ids
        # whose last delivery failed: written only by a failed delivery, so free otherwise.
        self.errors: dict[str, str] = {}
        # Due items of a route nobody handles yet, out of the heap until someone does.
        self.parked: dict[str, ScheduleItem] = {}
        self.dead: dict[str, DeadLetter] = {}
        # flow id -> ids of its scheduled items, so cancel_flow does not scan every item: a
        # tuple while there are few (a flow instance has a handful: 64 bytes, a set 216), a
        # set past _SMALL_FLOW (so that adding and removing stay O(1) for big flows).
        self.flows: dict[str, tuple[str, ...] | set[str]] = {}
        self.generations = itertools.count(1)
        # Ids paused (flowsched.memory.timer_query): pop_due drops their heap entries once
        # due, and resume pushes one again.
        self.paused: set[str] = set()

    def __len__(self) -> int:
        return len(self.items)

    def next_generation(self) -> int:
        return next(self.generations)

    def get(self, item_id: object) -> ScheduleItem | None:
        """The current form of ``item_id``; ``None`` for an id no item can have (ids are
        strings: an unhashable one is not a ``TypeError`` here, as it is not on Mongo)."""
        return self.items.get(item_id) if isinstance(item_id, str) else None

    def put(self, item: ScheduleItem) -> None:
        """Make ``item`` (already carrying a fresh generation) the current form of its id."""
        key = item.id
        items = self.items
        # One hash look-up for a new id (a dict of a million ids misses the CPU cache).
        old = items.setdefault(key, item)
        heappush(self.heap, (item.due, item.generation, key))
        if old is not item:
            items[key] = item
            self._forget(old)
            self._compact_if_stale()
        flow_id = item.flow_id
        if flow_id is not None:
            ids = self.flows.get(flow_id)
            if ids is None:
                self.flows[flow_id] = (key,)
            elif isinstance(ids, tuple):
                if key not in ids:
                    self.flows[flow_id] = (*ids, key) if len(ids) < _SMALL_FLOW else {*ids, key}
            else:
                ids.add(key)
        if self.dead:
            # A new schedule under the id supersedes its dead letter.
            self.dead.pop(key, None)

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` under a fresh generation (replacing its id's current form) and
        return the stored form: ``item`` itself when newly built, else a copy (the identity
        of a stored form is its fence)."""
        if item.generation:
            stored = item.with_generation(next(self.generations))
        else:
            stored = item  # newly built: stored as it is, no copy
            set_generation(item, next(self.generations))
        self.put(stored)
        return stored

    def settle(self, item: ScheduleItem, outcome: Outcome) -> bool:
        """Apply a delivery's ``outcome`` to ``item``, if it is still the current form of
        its id; ``False`` (nothing changed) for a stale delivery."""
        if isinstance(outcome, Completed):
            return self.complete(item)
        if isinstance(outcome, Redeliver):
            return self.reschedule(item, outcome.due, outcome.attempt, outcome.error)
        if isinstance(outcome, NextSlot):
            return self.advance(item, outcome.applied, outcome.due, outcome.runs, outcome.error)
        return self.bury(item, outcome.dead)

    def remove(self, item_id: str) -> ScheduleItem | None:
        """Drop the current form of ``item_id``; its heap entry goes stale."""
        item = self.items.pop(item_id, None) if isinstance(item_id, str) else None
        if item is not None:
            self._forget(item)
            self._compact_if_stale()
        return item

    def remove_flow(self, flow_id: str) -> list[str]:
        """Drop every item of ``flow_id``; return their ids."""
        ids = self.flows.pop(flow_id, ()) if isinstance(flow_id, str) else ()
        for item_id in ids:
            del self.items[item_id]
            self.attempts.pop(item_id, None)
            self.errors.pop(item_id, None)
            self.parked.pop(item_id, None)
            self.paused.discard(item_id)
        self._compact_if_stale()
        return sorted(ids)

    def pop_due(self, now: datetime, routes: Collection[str]) -> Claim | None:
        """Claim the earliest current item due by ``now`` whose route is handled, if any.

        Due items of routes not in ``routes`` are parked on the way (see :meth:`unpark`)."""
        claims: list[Claim] = []
        self.pop_due_batch(now, routes, 1, claims)
        return claims[0] if claims else None

    def pop_due_batch(
        self, now: datetime, routes: Collection[str], limit: int, out: list[Claim]
    ) -> None:
        """Claim up to ``limit`` current items due by ``now``, appending them to ``out``."""
        heap, items, attempts, paused = self.heap, self.items, self.attempts, self.paused
        while heap and heap[0][0] <= now and len(out) < limit:
            due, generation, key = heappop(heap)
            item = items.get(key)
            if item is None or item.generation != generation or item.due != due:
                continue  # replaced, cancelled or moved since this entry was pushed
            if paused and key in paused:
                continue  # paused: dropped here, resume pushes it again
            if item.route not in routes:
                self._park(item)
                continue
            out.append((item, attempts.get(key, 0)))

    def next_due(self) -> datetime | None:
        """Due time of the earliest current item in the heap (stale tops are dropped)."""
        heap, items = self.heap, self.items
        while heap:
            due, generation, key = heap[0]
            item = items.get(key)
            if item is not None and item.generation == generation and item.due == due:
                return due
            heappop(heap)
        return None

    def wake_at(self, latest: datetime) -> datetime:
        """When the leader should look again: the earliest due time, if before ``latest``."""
        head = self.next_due()
        return head if head is not None and head < latest else latest

    def next_due_between(
        self, until: datetime, after: datetime | None, routes: Collection[str]
    ) -> datetime | None:
        """The earliest due time at or before ``until`` (and after ``after``, if given) of a
        scheduled item. Without ``after``, the heap's head (an item already due for a route
        nobody handles counts until it is parked); with it, a scan of the items of
        ``routes``."""
        head = self.next_due()
        if head is None or head > until:
            return None
        if after is None or head > after:
            return head
        later = (
            item.due
            for item in self.items.values()
            if after < item.due <= until and item.route in routes and item.id not in self.paused
        )
        return min(later, default=None)

    def complete(self, item: ScheduleItem) -> bool:
        """The delivery of ``item`` succeeded: remove it if it is still current."""
        # One lookup on the common path (a dict of a million items misses the CPU cache).
        current = self.items.pop(item.id, None)
        if current is item:
            self._forget(item)
            return True
        if current is not None:
            self.items[item.id] = current  # a newer form: not ours to remove
        return False

    def reschedule(
        self, item: ScheduleItem, due: datetime, attempt: int, error: str | None = None
    ) -> bool:
        """Deliver ``item`` again at ``due`` (same generation), if it is still current,
        with ``attempt`` failures so far, the latest of them ``error``."""
        if self.items.get(item.id) is not item:
            return False
        moved = item.moved(due, item.previous)
        self.items[item.id] = moved
        self.attempts[item.id] = attempt
        if error is not None:
            self.errors[item.id] = error
        heappush(self.heap, (due, item.generation, item.id))
        return True

    def advance(
        self,
        item: ScheduleItem,
        applied: datetime | None,
        due: datetime,
        runs: int | None = None,
        error: str | None = None,
    ) -> bool:
        """A recurring ``item`` ticked: keep it (same generation, failures reset) with
        ``applied`` as its last slot and ``runs`` its runs so far (``None``: unchanged), due
        at ``due`` - if it is still current. ``error``: the text of a failed tick that
        counted (kept as the latest failure), ``None`` when it ran."""
        if self.items.get(item.id) is not item:
            return False
        moved = item.moved(due, applied, runs)
        self.items[item.id] = moved
        self.attempts.pop(item.id, None)
        if error is not None:
            self.errors[item.id] = error
        elif self.errors:
            self.errors.pop(item.id, None)
        heappush(self.heap, (due, item.generation, item.id))
        return True

    def restore(self, item: ScheduleItem) -> None:
        """Put a claimed item back in the heap unchanged (its delivery was interrupted)."""
        if self.items.get(item.id) is item:
            heappush(self.heap, (item.due, item.generation, item.id))

    def bury(self, item: ScheduleItem, dead: DeadLetter) -> bool:
        """Move ``item`` to the dead letters, if it is still current."""
        if self.items.get(item.id) is not item:
            return False
        self.remove(item.id)
        self.dead[item.id] = dead
        return True

    def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        """Schedule a dead letter again at ``due`` under a fresh generation, attempts reset."""
        dead = self.dead.pop(item_id, None)
        if dead is None:
            return None
        item = dead.item.moved(due, dead.item.previous).with_generation(self.next_generation())
        self.put(item)
        return item

    def unpark(self, route: str) -> int:
        """Put parked items of ``route`` back in the heap; return how many."""
        moved = [item for item in self.parked.values() if item.route == route]
        for item in moved:
            del self.parked[item.id]
            self.restore(item)
        return len(moved)

    def _park(self, item: ScheduleItem) -> None:
        self.parked[item.id] = item
        log.info(
            "no handler for route %s here: %s waits until one is registered",
            item.route,
            item.id,
            extra={"item_id": item.id, "kind": item.kind.value, "route": item.route},
        )

    def _compact_if_stale(self) -> None:
        heap = self.heap
        if len(heap) > COMPACT_AT and len(heap) > 2 * len(self.items):
            self.compact()

    def compact(self) -> None:
        """Drop every stale heap entry (cancelled, replaced or moved forms).

        Only entries that :meth:`pop_due` would still deliver are kept, so an item being
        delivered now (claimed, out of the heap) or parked is not put back by this."""
        items = self.items
        live = []
        for entry in self.heap:
            item = items.get(entry[2])
            if item is not None and item.generation == entry[1] and item.due == entry[0]:
                live.append(entry)
        heapify(live)
        self.heap[:] = live  # in place: callers may hold a reference to the list

    def _forget(self, item: ScheduleItem) -> None:
        """Drop the indexes of a form that is no longer current."""
        key = item.id
        if self.attempts:
            self.attempts.pop(key, None)
        if self.errors:
            self.errors.pop(key, None)
        if self.parked:
            self.parked.pop(key, None)
        if self.paused:
            self.paused.discard(key)
        flow_id = item.flow_id
        if flow_id is not None:
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
