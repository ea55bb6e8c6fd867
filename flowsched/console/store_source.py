"""Internal: the console over the store interface (``StoreSource``): ``flowsched console
--uri postgresql://...``, or ``app(store)`` for any :class:`~flowsched.store.TimerStore`.

Everything goes through the store's own calls, so an operator's action is fenced exactly like
a program's:

* the timers list, its count, one timer, the charts and the claims per node come from
  ``timers()`` (index-served on PostgreSQL), a timer's attempts from ``history()``;
* dead letters and quarantined records from ``dead_letters()`` and ``quarantined()`` (each
  read whole, then paged here: the interface has no paged form of them);
* cancel is ``remove(id, generation=...)`` (a newer form stays), run now ``put`` of the form
  the operator saw, moved to now, requeue ``requeue(id, now)``; live nodes from
  ``live_nodes()`` when the store has it.

What the interface cannot answer is done simply and said here: the ``flow`` filter is the
exact flow id (``timers(flow_id=...)``), not a prefix; the ``state`` filters map to the
store's states (``waiting``/``overdue``: scheduled and due after / before now; ``running``/
``stale``: claimed with a live / ended lease; ``retrying``: attempts above 0), the last three
checked here page by page; a ``previous`` page and the count read forward through
``timers()`` (the count stops at :data:`COUNT_CAP`); the charts read the timers of their
window, at most :data:`CHART_CAP`; the audit is the one given (on PostgreSQL
:class:`~flowsched.console.postgres_audit.PostgresAudit`, ``<table>_audit``), else kept in
memory (lost on restart); routes per node and the bucket count are MongoDB's.
"""

from __future__ import annotations

import inspect
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import anyio.to_thread

from flowsched.clock import Clock
from flowsched.console.audit import MemoryAudit
from flowsched.console.memory_source import ListedSource, _counted
from flowsched.console.queries import ID_INDEX, FindSpec, PageQuery, TimerQuery, slots
from flowsched.console.source import Operator, Outcome
from flowsched.mongo.documents import item_document
from flowsched.records import ScheduleItem
from flowsched.steering import Attempt, TimerInfo, TimerState
from flowsched.store.paging import encode_cursor
from flowsched.store.records import TimerSelection

__all__ = ["CHART_CAP", "COUNT_CAP", "StoreSource"]

COUNT_CAP = 10_000
"""Most matches a list counts on a store (read through ``timers()``; "more than" beyond)."""
CHART_CAP = 20_000
"""Most timers a chart reads from a store (the rest of its window is not drawn)."""
_PAGE = 500
_TINY = timedelta(microseconds=1)


class StoreSource(ListedSource[Any]):
    """The console's reads and actions over ``store``'s calls (sync or coroutines)."""

    needs_mongo = False
    lists = True
    runs_now = True
    count_limit = COUNT_CAP

    def __init__(
        self, store: Any, clock: Clock, name: str | None = None, audit: Any = None
    ) -> None:
        self.store = store
        self.name = name or str(getattr(store, "table", type(store).__name__))
        self._clock = clock
        self.audit_log = MemoryAudit() if audit is None else audit

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.store, name)
        if inspect.iscoroutinefunction(method):
            return await method(*args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: method(*args, **kwargs))

    # -- the timers list -------------------------------------------------------------------

    def _selection(self, query: TimerQuery, now: datetime) -> tuple[TimerSelection, Keep]:
        due_from = query.due_from
        due_to = None if query.due_to is None else query.due_to - _TINY  # the store's: <=
        state: TimerState | None = None
        keep: Keep = _live  # dead letters have pages of their own, as on MongoDB
        if query.state in ("waiting", "overdue"):
            state = "scheduled"
            if query.state == "waiting":
                due_from = max(due_from, now + _TINY) if due_from else now + _TINY
            else:
                due_to = min(due_to, now) if due_to else now
        elif query.state in ("running", "stale"):
            state = "claimed"
            live = query.state == "running"
            keep = lambda i: (i.lease_until is not None and i.lease_until > now) == live  # noqa: E731
        elif query.state == "retrying":
            keep = lambda i: i.attempts > 0 and _live(i)  # noqa: E731
        selection = TimerSelection(
            id_prefix=query.id_prefix, flow_id=query.flow_prefix, kind=query.kind,
            handler=query.handler, state=state, due_from=due_from, due_to=due_to, limit=_PAGE,
        )  # fmt: skip
        return selection, keep

    async def _walk(
        self, selection: TimerSelection, keep: Keep, after: tuple[datetime, str] | None = None
    ) -> AsyncIterator[TimerInfo]:
        """Every timer of ``selection`` that ``keep`` admits, soonest due first, after
        ``after``, read a page of ``timers()`` at a time."""
        cursor = None if after is None else encode_cursor(*after)
        while True:
            page = await self._call("timers", _with(selection, after=cursor))
            for info in page.items:
                if keep(info):
                    yield info
            if page.next is None:
                return
            cursor = page.next

    async def timers(self, query: TimerQuery, now: datetime) -> tuple[list[Any], bool]:
        """One page of the timers list in ``(due, id)`` order (as :class:`MongoSource`'s),
        and whether more follow in the page's direction."""
        selection, keep = self._selection(query, now)
        position = query.position()
        cursor = None
        if position is not None and isinstance(position[0][0], datetime):
            cursor = (position[0][0], str(position[0][1]))
        found: list[TimerInfo] = []
        if position is not None and position[1]:  # back: the last `limit` before the cursor
            behind: deque[TimerInfo] = deque(maxlen=query.limit + 1)
            async for info in self._walk(selection, keep):
                if cursor is not None and (info.due, info.id) >= cursor:
                    break
                behind.append(info)
            more = len(behind) > query.limit
            found = list(behind)[-query.limit :]
        else:
            async for info in self._walk(selection, keep, cursor):
                found.append(info)
                if len(found) > query.limit:
                    break
            more = len(found) > query.limit
            found = found[: query.limit]
        return [await self._document(info) for info in found], more  # both in due order

    async def count(self, query: TimerQuery, now: datetime) -> int:
        """How many timers match (at most :data:`COUNT_CAP`, read through ``timers()``)."""
        selection, keep = self._selection(query, now)
        counted = 0
        async for _ in self._walk(selection, keep):
            counted += 1
            if counted >= COUNT_CAP:
                break
        return counted

    async def _document(self, info: TimerInfo, generation: int | None = None) -> dict[str, Any]:
        """``info`` as the fields of a MongoDB document (what the console's views read)."""
        item = ScheduleItem(info.id, info.kind, info.due, info.flow_id, info.payload,
                            handler=info.handler, recurrence=info.recurrence)  # fmt: skip
        # A listing has no generation (TimerInfo has none): 1 stands in, never used to act.
        document = item_document(item, generation or 1, info.attempts)
        document["last_error"] = info.last_error
        document["due"] = document["ready_at"] = info.due  # whole: the list's cursor needs it
        if info.node is not None and info.lease_until is not None:
            document["claim"] = {"owner": info.node, "token": "-", "lease_until": info.lease_until}
        return document

    async def _info(self, item_id: str) -> tuple[TimerInfo, int] | None:
        """The listing of ``item_id`` and its generation (``get`` for the due time, then
        ``timers()`` at exactly that due time and id)."""
        item = await self._call("get", item_id)
        if item is None:
            return None
        selection = TimerSelection(id_prefix=item_id, due_from=item.due, due_to=item.due)
        async for info in self._walk(selection, lambda i: i.id == item_id and i.state != "dead"):
            return info, item.generation
        return None

    async def timer(self, item_id: str) -> Any:
        """The timer's fields (as a document would hold them), or ``None``."""
        found = await self._info(item_id)
        return None if found is None else await self._document(*found)

    async def history(self, item_id: str) -> list[Attempt]:
        """The item's attempts, oldest first (the store's ``history()``)."""
        return list(await self._call("history", item_id))

    # -- dead letters, quarantine, nodes ---------------------------------------------------

    async def _letters(self) -> list[Any]:
        return list(await self._call("dead_letters"))

    async def quarantined(self, page: PageQuery) -> tuple[list[Any], FindSpec]:
        """A page of quarantined records, by id."""
        spec = page.find("_id", ID_INDEX)
        records = sorted(await self._call("quarantined"), key=lambda r: r.id)
        after = spec.filter.get("_id", {}).get("$gt") if page.after is not None else None
        documents = [
            {"_id": r.id, "reason": r.reason, "quarantined_at": r.quarantined_at,
             "document": dict(r.record)}
            for r in records
            if after is None or r.id > after
        ]  # fmt: skip
        return documents[: page.limit], spec

    async def node_documents(self) -> list[Any]:
        """The live nodes' heartbeats (``live_nodes()``; none if the store keeps none)."""
        if not callable(getattr(self.store, "live_nodes", None)):
            return []
        return [
            {"_id": n.node_id, "routes": list(n.routes), "renewed_at": n.renewed_at,
             "expires_at": n.expires_at}
            for n in await self._call("live_nodes")
        ]  # fmt: skip

    async def node(self, node_id: str) -> Any:
        """The heartbeat of ``node_id`` if it is live, else ``None``."""
        return next((n for n in await self.node_documents() if n["_id"] == node_id), None)

    async def claim_owners(self) -> list[Any]:
        """Claims per owner (``_id``: the node, ``n``: how many), from ``timers(state=
        "claimed")``."""
        held: Counter[str] = Counter()
        async for info in self._walk(TimerSelection(state="claimed", limit=_PAGE), _always):
            held[info.node or "?"] += 1
        return [{"_id": node, "n": n} for node, n in held.items()]

    async def routes(self) -> list[Any]:
        """None: pending items per route are an aggregation the interface does not have."""
        return []

    async def buckets(self) -> int | None:
        """None: buckets are MongoDB's."""
        return None

    # -- charts ----------------------------------------------------------------------------

    async def _dues(self, due_from: datetime | None, due_to: datetime | None,
                    state: Any = None) -> tuple[list[datetime], int]:  # fmt: skip
        """Due times in ``[due_from, due_to)`` (at most :data:`CHART_CAP`), and how many
        were not read beyond it (0, or 1 meaning "some")."""
        due_to = None if due_to is None else due_to - _TINY  # the store's due_to is <=
        selection = TimerSelection(state=state, due_from=due_from, due_to=due_to, limit=_PAGE)
        dues: list[datetime] = []
        async for info in self._walk(selection, _live):
            if len(dues) >= CHART_CAP:
                return dues, 1
            dues.append(info.due)
        return dues, 0

    async def forecast(self, per: str) -> tuple[list[datetime], dict[datetime, int], int]:
        """Due load over the next 24 h: slot starts, count per slot, and how many later
        (counted up to :data:`COUNT_CAP`)."""
        boundaries = slots(self._clock.now(), per, timedelta(hours=24))
        dues, _ = await self._dues(boundaries[0], boundaries[-1])
        later, _ = await self._dues(boundaries[-1], None)
        counts, _ = _counted(dues, boundaries)
        return boundaries[:-1], counts, len(later)

    async def lateness(self) -> tuple[list[datetime], dict[datetime, int], int]:
        """Scheduled (unclaimed) timers per minute of their due time over the last hour, and
        how many earlier."""
        now = self._clock.now()
        boundaries = slots(now - timedelta(hours=1), "minute", timedelta(hours=1))
        dues, _ = await self._dues(boundaries[0], now + _TINY, "scheduled")
        earlier, _ = await self._dues(None, boundaries[0], "scheduled")
        counts, _ = _counted(dues, boundaries)
        return boundaries[:-1], counts, len(earlier)

    # -- operator actions ------------------------------------------------------------------

    async def cancel(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Remove the form the operator saw (``remove(id, generation=...)``)."""
        if generation is not None and await self._call("remove", item_id, generation=generation):
            outcome = Outcome(True, f"cancelled {item_id}")
        else:
            outcome = await self._missed(item_id, "cancelled")
        return await self._record("cancel", item_id, who, outcome)

    async def run_now(self, item_id: str, generation: int | None, who: Operator) -> Outcome:
        """Make the unclaimed one-shot timer the operator saw due now (stored again, due now:
        a replace, so it gets a new generation)."""
        found = await self._info(item_id)
        item = await self._call("get", item_id)
        if found is None or item is None or item.generation != generation:
            outcome = await self._missed(item_id, "moved")
        elif item.recurrence is not None or found[0].state != "scheduled":
            outcome = Outcome(False, f"{item_id}: run now works on an unclaimed one-shot timer")
        else:
            await self._call("put", item.moved(self._clock.now()))
            outcome = Outcome(True, f"{item_id} is due now")
        return await self._record("run_now", item_id, who, outcome)

    async def _requeued(self, item_id: str) -> bool:
        return await self._call("requeue", item_id, self._clock.now()) is not None

    async def bulk_ids(self, bulk: Any, now: datetime) -> list[str]:
        """The ids a bulk action (:class:`flowsched.console.bulk.Bulk`) touches now: the
        dead letters of its handler (or kind), the timers of its flow, or of its filters."""
        if bulk.verb == "requeue":
            return [
                d.item.id
                for d in await self._letters()
                if (bulk.handler is not None and d.item.handler == bulk.handler)
                or (bulk.handler is None and d.item.handler is None
                    and d.item.kind.value == bulk.kind)
            ]  # fmt: skip
        keep: Keep = _live
        if bulk.verb == "cancel_flow":
            selection = TimerSelection(flow_id=bulk.flow_id, limit=_PAGE)
        else:
            selection, keep = self._selection(bulk.query, now)
        return [info.id async for info in self._walk(selection, keep)]

    async def bulk_one(self, verb: str, item_id: str) -> bool:
        """One item of a bulk action: requeue the dead letter, or remove the timer."""
        if verb == "requeue":
            return await self._call("requeue", item_id, self._clock.now()) is not None
        return bool(await self._call("remove", item_id))

    async def _missed(self, item_id: str, verb: str) -> Outcome:
        if await self._call("get", item_id) is None:
            return Outcome(False, f"no timer {item_id}: nothing {verb}")
        return Outcome(False, f"{item_id} changed since the page was shown: not {verb}")


Keep = Callable[[Any], bool]


def _always(_: Any) -> bool:
    return True


def _live(info: TimerInfo) -> bool:
    return info.state != "dead"


def _with(selection: TimerSelection, **changes: Any) -> TimerSelection:
    from dataclasses import replace

    return replace(selection, **changes)


def is_store(target: object) -> bool:
    """Whether ``target`` offers the store calls the console needs."""
    names = ("timers", "history", "dead_letters", "requeue", "remove", "get", "quarantined")
    return all(callable(getattr(target, name, None)) for name in names) and not isinstance(
        target, Mapping
    )
