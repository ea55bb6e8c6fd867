"""Internal: where the console reads and acts on a MongoDB namespace (and what both sources share).

:class:`MongoSource` reads the collections a :class:`~flowsched.mongo.MongoScheduler` keeps
(``<c>``, ``<c>_dead``, ``<c>_quarantine``, ``<c>_nodes``, ``<c>_settings``) with the
queries of :mod:`flowsched.console.queries`, a timer's attempts from ``<c>_history`` (with
:meth:`flowsched.mongo.history.MongoHistory.read_steps`, the scheduler's own reader), and
writes only: the operator actions (each
fenced on the generation the operator saw, so a stale page never cancels a timer scheduled
since), the bulk actions of :mod:`flowsched.console.bulk`, the audit in ``<c>_audit``
(:mod:`flowsched.console.audit`), and the ``(due, _id)`` index the list walks, if missing.

:class:`~flowsched.console.memory_source.MemorySource` is the same reads and actions over a
running scheduler's own calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from flowsched.cli.timers_render import iso
from flowsched.clock import Clock
from flowsched.console.audit import MongoAudit, entry
from flowsched.console.driver import AsyncCollection
from flowsched.console.queries import (
    CLAIM_INDEX,
    DEAD_INDEX,
    DUE_INDEX,
    DUE_KEYS,
    ID_INDEX,
    FindSpec,
    PageQuery,
    TimerQuery,
    failures_pipeline,
    forecast_pipeline,
    lateness_pipeline,
    slots,
)
from flowsched.history import MAX_HISTORY_LIMIT, HistoryPolicy
from flowsched.mongo.commands import Call, Steps
from flowsched.mongo.documents import (
    bson_utc,
    bucket_of,
    dead_letter_from_document,
    item_document,
    new_generation,
    truncate_ms,
)
from flowsched.mongo.history import MongoHistory
from flowsched.mongo.inspection import route_pipeline
from flowsched.port import ScheduleItem
from flowsched.steering import Attempt

__all__ = [
    "COUNT_LIMIT",
    "MongoSource",
    "Operator",
    "Outcome",
    "flow_order",
    "item_fields",
]

COUNT_LIMIT = 100_000
"""Most matches a list counts ("more than 100,000" beyond)."""


@dataclass(frozen=True, slots=True)
class Operator:
    """Who asked for an action: the identity the server established and the client's
    address (``identity`` has ``name`` and ``role``)."""

    identity: Any
    client: str

    @property
    def name(self) -> str:
        return str(getattr(self.identity, "name", "-"))


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


class AuditLog(Protocol):
    """Where a source keeps its audit entries (:class:`MongoAudit`, :class:`MemoryAudit`)."""

    async def record(self, record: Mapping[str, Any]) -> None: ...

    async def of_item(self, item_id: str) -> list[Any]: ...


A = TypeVar("A", bound=AuditLog)


class Audited(Generic[A]):
    """What every console source does with its audit log (an ``A``): record what an
    operator's action came to, and list the entries naming an item."""

    audit_log: A
    _clock: Clock

    async def audit_of(self, item_id: str) -> list[Any]:
        """The newest audit entries naming ``item_id``."""
        return await self.audit_log.of_item(item_id)

    async def _record(self, action: str, item_id: str, who: Operator, outcome: Outcome) -> Outcome:
        await self.audit_log.record(
            entry(self._clock.now(), action, who.identity, who.client, outcome.done,
                  outcome.message, item_id=item_id)
        )  # fmt: skip
        return outcome


class MongoSource(Audited[MongoAudit]):
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
        self.attempts = side("_history")
        self.audit_log = MongoAudit(side("_audit"))
        self._clock = clock
        self._due_index: str | None = None

    # -- reads ---------------------------------------------------------------------------

    async def timers(self, query: TimerQuery, now: datetime) -> tuple[list[Any], bool]:
        """One page of the timers list in ``(due, _id)`` order, and whether more follow in
        the page's direction (forward, or back for a ``before`` page)."""
        spec = query.find(now, await self.due_index())
        found = await self.items.find(replace(spec, limit=spec.limit + 1))
        more = len(found) > query.limit
        page = found[: query.limit]
        return (page[::-1] if query.before is not None else page), more

    async def count(self, query: TimerQuery, now: datetime) -> int:
        """How many timers match the page's filters (at most :data:`COUNT_LIMIT`; with no
        filter, the collection's count from its metadata)."""
        wanted = query.filter(now)
        if not wanted:
            return min(COUNT_LIMIT, await self.items.estimated_count())
        return await self.items.count(wanted, COUNT_LIMIT)

    async def due_index(self) -> str:
        """The name of the ``(due, _id)`` index, made once if the collection has none."""
        if self._due_index is None:
            name = await self.items.index_named(DUE_KEYS)
            if name is None:
                await self.items.create_index(list(DUE_KEYS), DUE_INDEX)
                name = DUE_INDEX
            self._due_index = name
        return self._due_index

    async def timer(self, item_id: str) -> Any:
        """The document of ``item_id``, or ``None``."""
        return await self.items.find_one({"_id": item_id})

    async def dead_letter(self, item_id: str) -> Any:
        """The dead letter of ``item_id``, or ``None``."""
        return await self.dead.find_one({"_id": item_id})

    async def history(self, item_id: str) -> list[Attempt]:
        """The attempts of ``item_id``, oldest first (CONTRACT section 18): what its nodes
        wrote to ``<c>_history`` (kept after the item is gone) and the one running on its
        claim, read as :meth:`MongoHistory.read_steps` reads them (``find_one`` calls; every
        attempt stored is shown, the nodes already keep at most their history limit)."""
        reader = MongoHistory(self._clock.now, "console", HistoryPolicy(MAX_HISTORY_LIMIT))
        steps: Steps[list[Attempt]] = reader.read_steps(_ById(), item_id)  # type: ignore[arg-type]
        roles = {"history": self.attempts, "items": self.items, "nodes": self.nodes}
        try:
            op = next(steps)
            while True:
                if not (isinstance(op, Call) and op.method == "find_one"):
                    raise TypeError(f"history read: unexpected operation {op!r}")
                op = steps.send(await roles[op.role].find_one(op.args[0]))
        except StopIteration as stop:
            attempts: list[Attempt] = stop.value
            return attempts

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

    async def node(self, node_id: str) -> Any:
        """The heartbeat of ``node_id``, or ``None`` (gone: its TTL index removed it)."""
        return await self.nodes.find_one({"_id": node_id})

    async def claim_owners(self) -> list[Any]:
        """Claims per owner (``_id``: the node, ``n``: how many), for nodes gone from the
        heartbeats."""
        pipeline: list[dict[str, Any]] = [
            {"$match": {"claim": {"$ne": None}}},
            {"$group": {"_id": "$claim.owner", "n": {"$sum": 1}}},
        ]
        return await self.items.aggregate(pipeline)

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

    async def redeliver(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """End the claim of a node whose heartbeat lapsed, so any node delivers it now (its
        lease ends now: the next claim takes it as a suspect, as after a lease ran out)."""
        now = truncate_ms(self._clock.now())
        document = await self.items.find_one({"_id": item_id, "generation": generation})
        claim = document.get("claim") if document is not None else None
        if not isinstance(claim, dict):
            outcome = await self._missed(item_id, "delivered again (no claim to end)")
            return await self._record("redeliver", item_id, who, outcome)
        owner = claim.get("owner")
        heartbeat = await self.node(str(owner))
        expires = heartbeat.get("expires_at") if heartbeat is not None else None
        if isinstance(expires, datetime) and bson_utc(expires) > now:
            outcome = Outcome(False, f"{owner} is alive (heartbeat till {iso(expires)}): not moved")
            return await self._record("redeliver", item_id, who, outcome)
        fence = {"_id": item_id, "generation": generation, "claim.token": claim.get("token")}
        moved = await self.items.update_one(
            fence, {"$set": {"claim.lease_until": now, "ready_at": now}}
        )
        if moved:
            outcome = Outcome(True, f"{item_id}: claim of lapsed node {owner} ended, due now")
        else:
            outcome = await self._missed(item_id, "delivered again")
        return await self._record("redeliver", item_id, who, outcome)

    async def _missed(self, item_id: str, verb: str) -> Outcome:
        if await self.items.find_one({"_id": item_id}) is None:
            return Outcome(False, f"no timer {item_id}: nothing {verb.split()[0]}")
        return Outcome(False, f"{item_id} changed since the page was shown: not {verb}")


class _ById:
    """The one store call :meth:`MongoHistory.read_steps` makes: an item's filter (the
    console finds items by ``_id`` alone, as its other pages do)."""

    @staticmethod
    def key(item_id: object) -> dict[str, Any]:
        return {"_id": item_id}


def flow_order(document: Mapping[str, Any]) -> tuple[str, str]:
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
