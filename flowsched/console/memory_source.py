"""Internal: the console over a running scheduler's own calls (``MemorySource``).

It serves what the scheduler can answer (``get``, ``scheduled``, ``dead_letters``,
``requeue``, ``cancel``, ``schedule``: plain or coroutines, so an async in-memory scheduler
works too): the timers list and its filters, one timer, the due-load and lateness charts,
dead letters and the three actions. It filters a snapshot of every item in the process (no
index), and an in-memory scheduler has no claims, leases, nodes or quarantine: a timer is
waiting or overdue, and the nodes and quarantine pages say they need MongoDB.
"""

from __future__ import annotations

import bisect
import inspect
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from flowsched.clock import Clock
from flowsched.console.audit import MemoryAudit
from flowsched.console.queries import (
    DEAD_INDEX,
    FindSpec,
    PageQuery,
    TimerQuery,
    slots,
)
from flowsched.console.source import COUNT_LIMIT, A, Audited, Operator, Outcome, item_fields
from flowsched.mongo.documents import dead_letter_document
from flowsched.port import DeadLetter, ScheduleItem

__all__ = ["MemorySource"]


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class ListedSource(Audited[A]):
    """A source whose dead letters come as one list (:meth:`_letters`, its scheduler's or
    store's ``dead_letters()``): served by id and in pages as the MongoDB source serves
    its collection; its audit log kept in memory."""

    async def _letters(self) -> list[Any]:
        raise NotImplementedError

    async def _requeued(self, item_id: str) -> bool:
        """Requeue the dead letter ``item_id``, due now; whether it was."""
        raise NotImplementedError

    async def requeue(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Requeue the dead letter the operator saw, due now, attempts reset."""
        letter = await self.dead_letter(item_id)
        if letter is None or letter.get("generation") != generation:
            outcome = Outcome(False, f"no dead letter {item_id} of that generation: not requeued")
        elif await self._requeued(item_id):
            outcome = Outcome(True, f"requeued {item_id}: due now, attempts reset")
        else:
            outcome = Outcome(False, f"{item_id} could not be requeued (scheduled again?)")
        return await self._record("requeue", item_id, who, outcome)

    async def dead_by_handler(self) -> list[Any]:
        """Dead letters per handler / kind (as the aggregation of the MongoDB source)."""
        groups = Counter((d.item.handler, d.item.kind.value) for d in await self._letters())
        return [{"_id": {"handler": h, "kind": k}, "n": n} for (h, k), n in groups.items()]

    async def dead_letter(self, item_id: str) -> Any:
        """The dead letter of ``item_id`` as its document, or ``None``."""
        for dead in await self._letters():
            if dead.item.id == item_id:
                return dead_letter_document(dead)
        return None

    async def dead_letters(self, page: PageQuery) -> tuple[list[Any], FindSpec]:
        """A page of dead letters in ``(dead_at, id)`` order, after ``page.after``."""
        spec = page.find("dead_at", DEAD_INDEX)
        documents = sorted(
            (dead_letter_document(d) for d in await self._letters()),
            key=lambda d: (d["dead_at"], d["_id"]),
        )
        if page.after is not None:
            documents = [d for d in documents if _after(d, spec)]
        return documents[: page.limit], spec


class MemorySource(ListedSource[MemoryAudit]):
    """A running scheduler's own view: its timers, dead letters and the operator actions."""

    needs_mongo = True
    """Claims, leases, nodes and quarantine are MongoDB's (the pages that show them say so)."""

    def __init__(self, scheduler: Any, clock: Clock) -> None:
        self.name = type(scheduler).__name__
        self.lists = callable(getattr(scheduler, "scheduled", None))
        """Whether the timers list and the overview are served (``scheduled()``: the
        in-memory schedulers; a scheduler without it gets the timer and dead-letter pages)."""
        self.runs_now = callable(getattr(scheduler, "schedule", None))
        self._scheduler = scheduler
        self._clock = clock
        self.audit_log = MemoryAudit()

    async def timers(self, query: TimerQuery, now: datetime) -> tuple[list[Any], bool]:
        """One page of the timers list (the ``(due, _id)`` order and cursors of
        :class:`MongoSource`'s), and whether more follow in the page's direction."""
        documents = sorted(await self._matching(query, now), key=_due_order)
        position = query.position()
        if position is not None:
            values, back = position
            cursor = (values[0], str(values[1]))
            if back:
                documents = [d for d in documents if _due_order(d) < cursor][::-1]
            else:
                documents = [d for d in documents if _due_order(d) > cursor]
        page = documents[: query.limit]
        return (page[::-1] if query.before is not None else page), len(documents) > query.limit

    async def count(self, query: TimerQuery, now: datetime) -> int:
        """How many timers match the page's filters (at most :data:`COUNT_LIMIT`)."""
        return min(COUNT_LIMIT, len(await self._matching(query, now)))

    async def _matching(self, query: TimerQuery, now: datetime) -> list[dict[str, Any]]:
        return [d for d in await self._documents() if _matches(query, d, now)]

    async def forecast(self, per: str) -> tuple[list[datetime], dict[datetime, int], int]:
        """Due load over the next 24 h (as :meth:`MongoSource.forecast`)."""
        boundaries = slots(self._clock.now(), per, timedelta(hours=24))
        dues = [due for due in await self._dues() if due >= boundaries[0]]
        return boundaries[:-1], *_counted(dues, boundaries)

    async def lateness(self) -> tuple[list[datetime], dict[datetime, int], int]:
        """Items due and not delivered yet, per minute of their due time over the last hour."""
        now = self._clock.now()
        boundaries = slots(now - timedelta(hours=1), "minute", timedelta(hours=1))
        dues = [due for due in await self._dues() if due <= now]
        counts, _ = _counted([due for due in dues if due >= boundaries[0]], boundaries)
        return boundaries[:-1], counts, sum(1 for due in dues if due < boundaries[0])

    async def node_documents(self) -> list[Any]:
        """None: an in-memory scheduler is no node of a cluster (it has no heartbeat)."""
        return []

    async def routes(self) -> list[Any]:
        """None: which node serves a route is a cluster's question (no node, no route rows)."""
        return []

    async def timer(self, item_id: str) -> Any:
        """The item's fields (as a document would hold them), or ``None``."""
        item = await _maybe(self._scheduler.get(item_id))
        return None if item is None else item_fields(item)

    async def history(self, item_id: str) -> list[Any] | None:
        """The item's attempts (CONTRACT section 18's ``history()``), or ``None`` when the
        scheduler keeps none."""
        call = getattr(self._scheduler, "history", None)
        return list(await _maybe(call(item_id))) if callable(call) else None

    async def cancel(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Cancel the timer if it is still the one the operator saw."""
        seen = await self._seen(item_id, generation, "cancelled")
        if isinstance(seen, Outcome):
            outcome = seen
        elif await _maybe(self._scheduler.cancel(item_id)):
            outcome = Outcome(True, f"cancelled {item_id}")
        else:
            outcome = Outcome(False, f"no timer {item_id}: nothing cancelled")
        return await self._record("cancel", item_id, who, outcome)

    async def run_now(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Make a one-shot timer due now, if it is still the one the operator saw (it is
        scheduled again, due now: a replace, so it gets a new generation)."""
        seen = await self._seen(item_id, generation, "moved")
        if isinstance(seen, Outcome):
            outcome = seen
        elif seen.recurrence is not None:
            outcome = Outcome(False, f"{item_id} is recurring: run now works on a one-shot timer")
        else:
            await _maybe(self._scheduler.schedule(seen.moved(self._clock.now())))
            outcome = Outcome(True, f"{item_id} is due now")
        return await self._record("run_now", item_id, who, outcome)

    async def _requeued(self, item_id: str) -> bool:
        return bool(await _maybe(self._scheduler.requeue(item_id)))

    async def _seen(
        self, item_id: str, generation: int | None, verb: str
    ) -> ScheduleItem | Outcome:
        """The timer if it is still the one the operator saw, else the refusal to record."""
        item: ScheduleItem | None = await _maybe(self._scheduler.get(item_id))
        if item is None:
            return Outcome(False, f"no timer {item_id}: nothing {verb}")
        if item.generation != generation:
            return Outcome(False, f"{item_id} changed since the page was shown: not {verb}")
        return item

    async def _letters(self) -> list[DeadLetter]:
        return list(await _maybe(self._scheduler.dead_letters()))

    async def _dues(self) -> list[datetime]:
        # The charts need due times only: no document built per item.
        return [item.due for item in await _maybe(self._scheduler.scheduled())]

    async def _documents(self) -> list[dict[str, Any]]:
        return [item_fields(item) for item in await _maybe(self._scheduler.scheduled())]


def _due_order(document: Mapping[str, Any]) -> tuple[datetime, str]:
    return document["due"], str(document.get("_id"))


def _matches(query: TimerQuery, document: Mapping[str, Any], now: datetime) -> bool:
    """Whether an in-memory item's fields pass every filter of ``query`` (as its Mongo
    conditions would: an in-memory item is never claimed, so running and stale match none)."""
    flow_id = document.get("flow_id")
    due: datetime = document["due"]
    checks = (
        query.id_prefix is None or str(document["_id"]).startswith(query.id_prefix),
        query.flow_prefix is None
        or (flow_id is not None and flow_id.startswith(query.flow_prefix)),
        query.kind is None or document.get("kind") == query.kind.value,
        query.handler is None or document.get("handler") == query.handler,
        query.due_from is None or due >= query.due_from,
        query.due_to is None or due < query.due_to,
        query.state is None or _in_state(query.state, document, now),
    )
    return all(checks)


def _in_state(state: str, document: Mapping[str, Any], now: datetime) -> bool:
    if state == "waiting":
        return bool(document["due"] > now)
    if state == "overdue":
        return bool(document["due"] <= now)
    if state == "retrying":
        return bool(document.get("attempts", 0) > 0)
    return False  # running, stale: claims are MongoDB's


def _counted(dues: list[datetime], boundaries: list[datetime]) -> tuple[dict[datetime, int], int]:
    """Per slot of ``boundaries``, how many of ``dues`` fall in it; and how many after."""
    counts: dict[datetime, int] = {}
    later = 0
    for due in dues:
        slot = bisect.bisect_right(boundaries, due) - 1
        if slot >= len(boundaries) - 1:
            later += 1
        elif slot >= 0:
            counts[boundaries[slot]] = counts.get(boundaries[slot], 0) + 1
    return counts, later


def _after(document: Mapping[str, Any], spec: FindSpec) -> bool:
    # The in-memory twin of the keyset condition of spec.filter (after (dead_at, _id)).
    condition = spec.filter["$or"]
    at = condition[0]["dead_at"]["$gt"]
    key = (document["dead_at"], document["_id"])
    return key > (at, condition[1]["_id"]["$gt"])
