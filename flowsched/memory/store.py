"""The in-memory timer store: a lazy-deletion heap plus an id map, fenced by record identity.

A *record* is the tuple ``(due, generation, item, attempt)``. The id map holds the one
*current* record of every scheduled id; the heap may also hold stale records (replaced,
cancelled, already redelivered), which are dropped when they reach the top. A record is
current exactly when ``items.get(record[2].id) is record``: that identity check is the fence
(id + generation) every delivery passes before its handler runs and again before its outcome
is applied, so a stale delivery can never touch the record that replaced it.

Generations are unique within a store, so heap order is ``(due, generation)`` (same due:
schedule order) and two items are never compared.

Not thread-safe: :class:`~flowsched.memory.InMemoryScheduler` calls every method under its lock.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime
from heapq import heappop, heappush

from flowsched.port import DeadLetter, ScheduleItem, ScheduleKind

__all__ = ["Record", "TimerStore"]

log = logging.getLogger("flowsched.memory")

Record = tuple[datetime, int, ScheduleItem, int]
"""``(due, generation, item, attempt)``; ``attempt`` counts earlier failed deliveries."""


class TimerStore:
    """Scheduled items, the heap that orders them, parked items and dead letters."""

    __slots__ = ("dead", "flows", "generations", "heap", "items", "parked")

    def __init__(self) -> None:
        self.items: dict[str, Record] = {}
        self.heap: list[Record] = []
        # Due items of a kind nobody handles yet, out of the heap until someone subscribes.
        self.parked: dict[str, Record] = {}
        self.dead: dict[str, DeadLetter] = {}
        # flow id -> ids of its scheduled items, so cancel_flow does not scan every item.
        self.flows: dict[str, set[str]] = {}
        self.generations = itertools.count(1)

    def __len__(self) -> int:
        return len(self.items)

    def next_generation(self) -> int:
        return next(self.generations)

    def put(self, item: ScheduleItem) -> Record:
        """Make ``item`` (already carrying a fresh generation) the current form of its id."""
        key = item.id
        record: Record = (item.due, item.generation, item, 0)
        items = self.items
        old = items.get(key)
        items[key] = record
        heappush(self.heap, record)
        if old is not None:
            self._forget(old)
        if item.flow_id is not None:
            self.flows.setdefault(item.flow_id, set()).add(key)
        if self.dead:
            # A new schedule under the id supersedes its dead letter.
            self.dead.pop(key, None)
        return record

    def remove(self, item_id: str) -> Record | None:
        """Drop the current form of ``item_id``; its heap entry goes stale."""
        record = self.items.pop(item_id, None)
        if record is not None:
            self._forget(record)
        return record

    def remove_flow(self, flow_id: str) -> list[str]:
        """Drop every item of ``flow_id``; return their ids."""
        ids = self.flows.pop(flow_id, set())
        for item_id in ids:
            del self.items[item_id]
            if self.parked:
                self.parked.pop(item_id, None)
        return sorted(ids)

    def is_current(self, record: Record) -> bool:
        return self.items.get(record[2].id) is record

    def pop_due(self, now: datetime, kinds: Collection[ScheduleKind]) -> Record | None:
        """Take the earliest current record due by ``now`` whose kind is handled, if any.

        Due records of kinds not in ``kinds`` are parked on the way (see :meth:`unpark`)."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            record = heappop(heap)
            if self.items.get(record[2].id) is not record:
                continue
            if record[2].kind not in kinds:
                self._park(record)
                continue
            return record
        return None

    def pop_due_batch(
        self, now: datetime, kinds: Collection[ScheduleKind], limit: int, out: list[Record]
    ) -> list[Record]:
        """Like :meth:`pop_due`, up to ``limit`` records at once, appended to ``out``."""
        heap, items = self.heap, self.items
        while heap and heap[0][0] <= now and len(out) < limit:
            record = heappop(heap)
            item = record[2]
            if items.get(item.id) is not record:
                continue
            if item.kind not in kinds:
                self._park(record)
                continue
            out.append(record)
        return out

    def next_due(self) -> datetime | None:
        """Due time of the earliest current record in the heap (stale tops are dropped)."""
        heap, items = self.heap, self.items
        while heap:
            record = heap[0]
            if items.get(record[2].id) is record:
                return record[0]
            heappop(heap)
        return None

    def complete(self, record: Record) -> bool:
        """The delivery of ``record`` succeeded: remove it if it is still current."""
        if self.items.get(record[2].id) is not record:
            return False
        self.remove(record[2].id)
        return True

    def reschedule(self, record: Record, due: datetime, attempt: int) -> Record | None:
        """Deliver ``record`` again at ``due`` (same generation), if it is still current."""
        item = record[2]
        if self.items.get(item.id) is not record:
            return None
        # Rare path (a handler failed), so the validating dataclass copy is fine here.
        moved = replace(item, due=due)
        again: Record = (due, item.generation, moved, attempt)
        self.items[item.id] = again
        heappush(self.heap, again)
        return again

    def restore(self, record: Record) -> None:
        """Put a claimed record back in the heap unchanged (its delivery was interrupted)."""
        if self.items.get(record[2].id) is record:
            heappush(self.heap, record)

    def bury(self, record: Record, dead: DeadLetter) -> bool:
        """Move ``record`` to the dead letters, if it is still current."""
        if self.items.get(record[2].id) is not record:
            return False
        self.remove(record[2].id)
        self.dead[record[2].id] = dead
        return True

    def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        """Schedule a dead letter again at ``due`` under a fresh generation, attempts reset."""
        dead = self.dead.pop(item_id, None)
        if dead is None:
            return None
        item = replace(dead.item, due=due).with_generation(self.next_generation())
        self.put(item)
        return item

    def unpark(self, kinds: Collection[ScheduleKind]) -> int:
        """Put parked records of ``kinds`` back in the heap; return how many."""
        moved = [r for r in self.parked.values() if r[2].kind in kinds]
        for record in moved:
            del self.parked[record[2].id]
            if self.items.get(record[2].id) is record:
                heappush(self.heap, record)
        return len(moved)

    def _park(self, record: Record) -> None:
        item = record[2]
        self.parked[item.id] = record
        log.info(
            "no handler subscribed for %s: %s waits until one is",
            item.kind.value,
            item.id,
            extra={"item_id": item.id, "kind": item.kind.value},
        )

    def _forget(self, record: Record) -> None:
        """Drop the indexes of a record that is no longer current."""
        item = record[2]
        if self.parked:
            self.parked.pop(item.id, None)
        if item.flow_id is not None:
            ids = self.flows.get(item.flow_id)
            if ids is not None:
                ids.discard(item.id)
                if not ids:
                    del self.flows[item.flow_id]
