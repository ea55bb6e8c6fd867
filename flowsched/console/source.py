"""Internal: where the console reads and acts: a MongoDB namespace, or a running scheduler.

:class:`MongoSource` reads the collections a :class:`~flowsched.mongo.MongoScheduler` keeps
(``<c>``, ``<c>_dead``, ``<c>_quarantine``, ``<c>_nodes``, ``<c>_settings``) with the
queries of :mod:`flowsched.console.queries`, and writes only two kinds of thing: the three
operator actions (each fenced on the generation the operator saw, so a stale page never
cancels a timer scheduled since) and their records in ``<c>_audit``.

:class:`MemorySource` serves what a scheduler's own calls can answer (``get``,
``scheduled``, ``dead_letters``, ``requeue``, ``cancel``, ``schedule``: plain or coroutines,
so an async in-memory scheduler works too): the timers list and its filters, one timer, the
due-load and lateness charts, dead letters and the three actions. It filters a snapshot of
every item in the process (no index), and an in-memory scheduler has no claims, leases,
nodes or quarantine: a timer is waiting or overdue, and the nodes and quarantine pages say
they need MongoDB.
"""

from __future__ import annotations

import bisect
import inspect
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from flowsched.clock import Clock
from flowsched.console.driver import AsyncCollection
from flowsched.console.queries import (
    CLAIM_INDEX,
    DEAD_INDEX,
    ID_INDEX,
    FindSpec,
    PageQuery,
    TimerQuery,
    decode_cursor,
    failures_pipeline,
    forecast_pipeline,
    lateness_pipeline,
    slots,
)
from flowsched.mongo.documents import (
    bucket_of,
    dead_letter_document,
    dead_letter_from_document,
    item_document,
    new_generation,
    truncate_ms,
)
from flowsched.mongo.inspection import route_pipeline
from flowsched.port import DeadLetter, ScheduleItem

__all__ = ["AUDIT_LIMIT", "Outcome", "MemorySource", "MongoSource", "Operator", "item_fields"]

AUDIT_LIMIT = 50
"""Most audit entries shown on a timer's page (newest first)."""


@dataclass(frozen=True, slots=True)
class Operator:
    """Who asked for an action: the name given at sign-in and the client's address."""

    name: str
    client: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an operator action did: ``done`` or not, and a sentence saying so."""

    done: bool
    message: str


def item_fields(item: ScheduleItem) -> dict[str, Any]:
    """An item as the fields of its document (how the in-memory source shows one)."""
    document = item_document(item, item.generation)
    document.pop("claim", None)
    document.pop("ready_at", None)
    return document


def _audit_entry(
    action: str, item_id: str, who: Operator, outcome: Outcome, now: datetime
) -> dict[str, Any]:
    return {
        "at": truncate_ms(now),
        "who": who.name,
        "client": who.client,
        "action": action,
        "item_id": item_id,
        "done": outcome.done,
        "outcome": outcome.message,
    }


class MongoSource:
    """The namespace ``<database>.<collection>`` and its side collections."""

    needs_mongo = False
    lists = True
    runs_now = True

    def __init__(
        self, database: Any, collection: str, clock: Clock, scrub: Any, budget_ms: int = 5000
    ) -> None:
        def side(suffix: str) -> AsyncCollection:
            return AsyncCollection(database[f"{collection}{suffix}"], scrub, budget_ms)

        self.name = collection
        self.items = side("")
        self.dead = side("_dead")
        self.quarantine = side("_quarantine")
        self.nodes = side("_nodes")
        self.settings = side("_settings")
        self.audit = side("_audit")
        self._clock = clock
        self._audit_indexed = False

    # -- reads ---------------------------------------------------------------------------

    async def timers(self, query: TimerQuery, now: datetime) -> tuple[list[Any], bool]:
        """One page of the timers list, and whether more may follow (the page is full)."""
        if query.flow_prefix is None:
            page = await self.items.find(query.find(now))
            return page, len(page) == query.limit
        current, following = query.flow_steps(now)
        page = await self.items.find(current) if current is not None else []
        room = query.limit - len(page)
        if room == 0:
            return page, True
        more = await self.items.find(replace(following, limit=room))
        if len(more) < room:  # the prefix ends on this page
            return page + sorted(more, key=_flow_order), False
        # Index order groups flows, but the last one reached may be cut anywhere: read it
        # again from its first timer in _id order (one flow's range: small).
        last = more[-1].get("flow_id")
        page += sorted((d for d in more if d.get("flow_id") != last), key=_flow_order)
        page += await self.items.find(query.flow_whole(last, now, query.limit - len(page)))
        return page, True

    async def timer(self, item_id: str) -> Any:
        """The document of ``item_id``, or ``None``."""
        return await self.items.find_one({"_id": item_id})

    async def dead_letter(self, item_id: str) -> Any:
        """The dead letter of ``item_id``, or ``None``."""
        return await self.dead.find_one({"_id": item_id})

    async def dead_letters(self, page: PageQuery) -> tuple[list[Any], FindSpec]:
        """One page of dead letters, oldest first (the ``dead_at`` index)."""
        spec = page.find("dead_at", DEAD_INDEX)
        return await self.dead.find(spec), spec

    async def quarantined(self, page: PageQuery) -> tuple[list[Any], FindSpec]:
        """One page of quarantined records, by record id (``_id`` index)."""
        spec = page.find("_id", ID_INDEX)
        return await self.quarantine.find(spec), spec

    async def node_documents(self) -> list[Any]:
        """Every heartbeat document, live or expired (a TTL index removes old ones)."""
        return await self.nodes.find(FindSpec({}, [("_id", 1)], ID_INDEX, 500))

    async def buckets(self) -> int | None:
        """The bucket count the collection's nodes recorded (``None``: none yet)."""
        recorded = await self.settings.find_one({"_id": "buckets"})
        value = None if recorded is None else recorded.get("value")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    async def forecast(self, per: str) -> tuple[list[datetime], dict[datetime, int], int]:
        """Due load over the next 24 h: slot starts, count per slot, and how many later."""
        now = self._clock.now()
        boundaries = slots(now, per, timedelta(hours=24))
        groups = await self.items.aggregate(forecast_pipeline(boundaries), CLAIM_INDEX)
        return boundaries[:-1], *_bucketed(groups, "later")

    async def lateness(self) -> tuple[list[datetime], dict[datetime, int], int]:
        """Undelivered items per minute of their due time over the last hour, and earlier."""
        now = self._clock.now()
        boundaries = slots(now - timedelta(hours=1), "minute", timedelta(hours=1))
        groups = await self.items.aggregate(lateness_pipeline(now, boundaries), CLAIM_INDEX)
        return boundaries[:-1], *_bucketed(groups, "earlier")

    async def routes(self) -> list[Any]:
        """Pending items per route (count, oldest due, retrying, failures)."""
        return await self.items.aggregate(route_pipeline())

    async def dead_by_handler(self) -> list[Any]:
        """Dead letters per handler / kind."""
        return await self.dead.aggregate(failures_pipeline())

    async def audit_of(self, item_id: str) -> list[Any]:
        """The newest operator actions on ``item_id``."""
        # No hint: a read-only console never creates the index (the first action does).
        spec = FindSpec({"item_id": item_id}, [("at", -1), ("_id", -1)], None, AUDIT_LIMIT)
        return await self.audit.find(spec)

    # -- operator actions ----------------------------------------------------------------

    async def cancel(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Remove the timer the operator saw (same ``generation``)."""
        removed = await self.items.delete_one({"_id": item_id, "generation": generation})
        if removed:
            outcome = Outcome(True, f"cancelled {item_id}")
        else:
            outcome = await self._missed(item_id, "cancelled")
        return await self._record("cancel", item_id, who, outcome)

    async def run_now(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Make an unclaimed one-shot timer due now (a node picks it up on its next sweep)."""
        now = truncate_ms(self._clock.now())
        query = {"_id": item_id, "generation": generation, "claim": None, "recurrence": None}
        moved = await self.items.update_one(query, {"$set": {"due": now, "ready_at": now}})
        if moved:
            outcome = Outcome(True, f"{item_id} is due now")
        else:
            outcome = await self._missed(item_id, "moved (run now works on an unclaimed "
                                         "one-shot timer)")  # fmt: skip
        return await self._record("run_now", item_id, who, outcome)

    async def requeue(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Schedule the dead letter the operator saw again, due now, with attempts reset."""
        from pymongo.errors import DuplicateKeyError

        document = await self.dead.find_one({"_id": item_id, "generation": generation})
        if document is None:
            outcome = Outcome(False, f"no dead letter {item_id} of that generation: not requeued")
            return await self._record("requeue", item_id, who, outcome)
        old = dead_letter_from_document(document).item
        fresh = old.moved(self._clock.now(), old.previous)  # as MongoScheduler.requeue
        buckets = await self.buckets() or 1
        stored = item_document(fresh, new_generation(), bucket=bucket_of(old.id, buckets))
        try:
            await self.items.insert_one(stored)
        except DuplicateKeyError:
            outcome = Outcome(
                False, f"{item_id} is scheduled again since it died: cancel that timer first"
            )
            return await self._record("requeue", item_id, who, outcome)
        await self.dead.delete_one({"_id": item_id, "generation": generation})
        outcome = Outcome(True, f"requeued {item_id}: due now, attempts reset")
        return await self._record("requeue", item_id, who, outcome)

    async def _missed(self, item_id: str, verb: str) -> Outcome:
        if await self.items.find_one({"_id": item_id}) is None:
            return Outcome(False, f"no timer {item_id}: nothing {verb.split()[0]}")
        return Outcome(False, f"{item_id} changed since the page was shown: not {verb}")

    async def _record(self, action: str, item_id: str, who: Operator, outcome: Outcome) -> Outcome:
        if not self._audit_indexed:
            await self._index_audit()
        entry = _audit_entry(action, item_id, who, outcome, self._clock.now())
        await self.audit.insert_one(entry)
        return outcome

    async def _index_audit(self) -> None:
        await self.audit.create_index([("item_id", 1), ("at", -1)], "item_at")
        self._audit_indexed = True


def _flow_order(document: Mapping[str, Any]) -> tuple[str, str]:
    return str(document.get("flow_id")), str(document.get("_id"))


def _bucketed(groups: list[Any], default: str) -> tuple[dict[datetime, int], int]:
    counts: dict[datetime, int] = {}
    other = 0
    for group in groups:
        key = group.get("_id")
        if isinstance(key, datetime):
            counts[truncate_ms(key)] = int(group.get("n", 0))
        elif key == default:
            other = int(group.get("n", 0))
    return counts, other


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class MemorySource:
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
        self._audit: deque[dict[str, Any]] = deque(maxlen=1000)

    async def timers(self, query: TimerQuery, now: datetime) -> tuple[list[Any], bool]:
        """One page of the timers list (the order and cursor of :class:`MongoSource`'s), and
        whether more follow."""
        key: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            _id_order if query.flow_prefix is None else _flow_order
        )
        documents = sorted((d for d in await self._documents() if _matches(query, d, now)), key=key)
        if query.after is not None:
            cursor = tuple(decode_cursor(query.after, 1 if query.flow_prefix is None else 2))
            documents = [d for d in documents if key(d) > cursor]
        return documents[: query.limit], len(documents) > query.limit

    async def forecast(self, per: str) -> tuple[list[datetime], dict[datetime, int], int]:
        """Due load over the next 24 h (as :meth:`MongoSource.forecast`)."""
        boundaries = slots(self._clock.now(), per, timedelta(hours=24))
        dues = [d["due"] for d in await self._documents() if d["due"] >= boundaries[0]]
        return boundaries[:-1], *_counted(dues, boundaries)

    async def lateness(self) -> tuple[list[datetime], dict[datetime, int], int]:
        """Items due and not delivered yet, per minute of their due time over the last hour."""
        now = self._clock.now()
        boundaries = slots(now - timedelta(hours=1), "minute", timedelta(hours=1))
        dues = [d["due"] for d in await self._documents() if d["due"] <= now]
        counts, _ = _counted([due for due in dues if due >= boundaries[0]], boundaries)
        return boundaries[:-1], counts, sum(1 for due in dues if due < boundaries[0])

    async def node_documents(self) -> list[Any]:
        """None: an in-memory scheduler is no node of a cluster (it has no heartbeat)."""
        return []

    async def routes(self) -> list[Any]:
        """None: which node serves a route is a cluster's question (no node, no route rows)."""
        return []

    async def dead_by_handler(self) -> list[Any]:
        """Dead letters per handler / kind (as the aggregation of :class:`MongoSource`)."""
        groups = Counter((d.item.handler, d.item.kind.value) for d in await self._letters())
        return [{"_id": {"handler": h, "kind": k}, "n": n} for (h, k), n in groups.items()]

    async def timer(self, item_id: str) -> Any:
        """The item's fields (as a document would hold them), or ``None``."""
        item = await _maybe(self._scheduler.get(item_id))
        return None if item is None else item_fields(item)

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

    async def audit_of(self, item_id: str) -> list[Any]:
        """The newest operator actions on ``item_id`` (kept in memory, the last 1,000)."""
        found = [entry for entry in reversed(self._audit) if entry["item_id"] == item_id]
        return found[:AUDIT_LIMIT]

    async def cancel(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Cancel the timer if it is still the one the operator saw."""
        item = await _maybe(self._scheduler.get(item_id))
        if item is None:
            outcome = Outcome(False, f"no timer {item_id}: nothing cancelled")
        elif item.generation != generation:
            outcome = Outcome(False, f"{item_id} changed since the page was shown: not cancelled")
        elif await _maybe(self._scheduler.cancel(item_id)):
            outcome = Outcome(True, f"cancelled {item_id}")
        else:
            outcome = Outcome(False, f"no timer {item_id}: nothing cancelled")
        return self._record("cancel", item_id, who, outcome)

    async def run_now(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Make a one-shot timer due now, if it is still the one the operator saw (it is
        scheduled again, due now: a replace, so it gets a new generation)."""
        item = await _maybe(self._scheduler.get(item_id))
        if item is None:
            outcome = Outcome(False, f"no timer {item_id}: nothing moved")
        elif item.generation != generation:
            outcome = Outcome(False, f"{item_id} changed since the page was shown: not moved")
        elif item.recurrence is not None:
            outcome = Outcome(False, f"{item_id} is recurring: run now works on a one-shot timer")
        else:
            await _maybe(self._scheduler.schedule(item.moved(self._clock.now())))
            outcome = Outcome(True, f"{item_id} is due now")
        return self._record("run_now", item_id, who, outcome)

    async def requeue(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Requeue the dead letter (due now) through the scheduler."""
        letter = await self.dead_letter(item_id)
        if letter is None or letter.get("generation") != generation:
            outcome = Outcome(False, f"no dead letter {item_id} of that generation: not requeued")
        elif await _maybe(self._scheduler.requeue(item_id)):
            outcome = Outcome(True, f"requeued {item_id}: due now, attempts reset")
        else:
            outcome = Outcome(False, f"{item_id} could not be requeued (scheduled again?)")
        return self._record("requeue", item_id, who, outcome)

    async def _letters(self) -> list[DeadLetter]:
        return list(await _maybe(self._scheduler.dead_letters()))

    async def _documents(self) -> list[dict[str, Any]]:
        return [item_fields(item) for item in await _maybe(self._scheduler.scheduled())]

    def _record(self, action: str, item_id: str, who: Operator, outcome: Outcome) -> Outcome:
        self._audit.append(_audit_entry(action, item_id, who, outcome, self._clock.now()))
        return outcome


def _id_order(document: Mapping[str, Any]) -> tuple[str]:
    return (str(document.get("_id")),)


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
