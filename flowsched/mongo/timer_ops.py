"""Internal: every operation of the MongoDB timer stores, written once, without I/O.

:class:`TimerSteps` holds what one store keeps (its collections by role, its clock, its
history journal) and returns each operation as a procedure (:mod:`flowsched.mongo.commands`):
:class:`~flowsched.mongo.timer_store.MongoTimerStore` runs it with ``drive`` on pymongo's
``Collection`` (or mongomock), :class:`~flowsched.mongo.async_timer_store.AsyncMongoTimerStore`
with ``drive_async`` on ``AsyncCollection``: the two stores differ only in awaiting.

Documents are ``MongoScheduler``'s (:mod:`flowsched.mongo.documents`, ``bucket`` 0; paused
as it pauses them: the route moved aside, ``paused: true``), plus ``claim.at`` once a
claim's start is confirmed; the
indexes are ``MongoScheduler``'s (:func:`~flowsched.mongo.indexes.index_steps`); the history
is ``MongoScheduler``'s ``<name>_history`` (one document per item, bounded, TTL-expired:
:mod:`flowsched.mongo.history`). The firing path is in :mod:`flowsched.mongo.timer_claims`.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from flowsched.clock import Clock, ensure_utc
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy
from flowsched.mongo.commands import Call, Find, Steps
from flowsched.mongo.documents import (
    bson_utc_or_none,
    dead_letters_from,
    item_document,
    new_generation,
    truncate_ms,
)
from flowsched.mongo.history import MongoHistory, attempt_document, running_attempt
from flowsched.mongo.indexes import index_steps
from flowsched.mongo.store import MongoCollections
from flowsched.mongo.timer_claims import ClaimSteps, Doc
from flowsched.mongo.timer_history import info_of, item_filter, state_filter
from flowsched.mongo.timer_query import pause_steps, resume_steps
from flowsched.records import DeadLetter, ScheduleItem, set_generation
from flowsched.steering import Attempt, TimerInfo, TimerPage
from flowsched.store.info import dead_info
from flowsched.store.measured_clock import MeasuredClock
from flowsched.store.paging import encode_cursor
from flowsched.store.records import QuarantinedRecord, TimerSelection

__all__ = ["TimerSteps"]

_RUNNING = {"_id": 1, "generation": 1, "attempts": 1, "claim": 1}
"""What a removal reads back of the form it removed: its running attempt, if any."""


class TimerSteps(ClaimSteps):
    """The operations of one store on ``collection`` (sync or async: the procedures do no
    I/O), judged by ``clock`` when given, else by the database's measured time."""

    def __init__(
        self,
        collection: Any,
        clock: Clock | None,
        history_limit: int,
        history_retention: timedelta,
    ) -> None:
        super().__init__()
        self.roles = MongoCollections(collection)
        self.time = MeasuredClock(clock, None, what="MongoDB")
        policy = HistoryPolicy(history_limit, history_retention)
        self.journal = MongoHistory(self.time.estimate, "store", policy)
        self.name = str(collection.full_name)

    def setup(self) -> Steps[None]:
        """Create the indexes (idempotent): run once, before the first operation."""
        yield from index_steps()

    def now(self) -> Steps[datetime]:
        yield from self.measure()
        return truncate_ms(self.time.now())

    def _late(self, deadline: datetime | None) -> Steps[bool]:
        """Whether the database's time may be past ``deadline`` (checked before sending)."""
        if deadline is None:
            return False
        yield from self.measure()
        return self.time.latest() > deadline

    # -- items ---------------------------------------------------------------------

    def put(self, item: ScheduleItem, deadline: datetime | None) -> Steps[ScheduleItem]:
        if not isinstance(item, ScheduleItem):
            raise TypeError(f"put: expected a ScheduleItem, got {type(item).__name__}")
        if (yield from self._late(deadline)):
            raise SchedulerUnavailable(
                f"put({item.id!r}): past its deadline {deadline}; nothing was sent"
            )
        generation = new_generation()
        due = truncate_ms(item.due)
        if item.generation == 0 and due == item.due:
            set_generation(item, generation)
            stored = item
        else:
            stored = item.moved(due, item.previous).with_generation(generation)
        document = item_document(stored, generation)
        options = {"projection": _RUNNING, "upsert": True, "return_document": ReturnDocument.BEFORE}
        replace = Call("items", "find_one_and_replace", ({"_id": item.id}, document), options)
        try:
            old = yield replace
        except DuplicateKeyError:  # two upserts of one new id raced: now it is there
            old = yield replace
        yield Call("dead", "delete_one", ({"_id": item.id},))
        yield from self._keep_running([old])
        return stored

    def _keep_running(self, removed: list[Doc | None]) -> Steps[None]:
        """Record the attempts that were running on forms just removed or replaced (their
        settles will be stale): a caller learns from ``history`` that they had started."""
        records = []
        for doc in removed:
            running = running_attempt(doc)
            if doc is not None and running is not None:
                token = str(doc["claim"].get("token"))
                running = _with_attempt(running, doc.get("attempts"))
                records.append((doc["_id"], attempt_document(running, token)))
        if records:
            yield from self._history(records)

    def get(self, item_id: str) -> Steps[ScheduleItem | None]:
        if not isinstance(item_id, str):
            return None
        read = yield from self.read((yield Call("items", "find_one", ({"_id": item_id},))))
        return read[0] if read is not None else None

    def exists(self, item_id: str) -> Steps[bool]:
        if not isinstance(item_id, str):
            return False
        return (yield Call("items", "find_one", ({"_id": item_id}, {"_id": 1}))) is not None

    def remove(
        self, item_id: str, generation: int | None, deadline: datetime | None
    ) -> Steps[bool]:
        if not isinstance(item_id, str) or (yield from self._late(deadline)):
            return False
        found: Doc = {"_id": item_id}
        if generation is not None:
            found["generation"] = generation
        old = yield Call("items", "find_one_and_delete", (found,), {"projection": _RUNNING})
        yield from self._keep_running([old])
        return old is not None

    def remove_flow(self, flow_id: str, deadline: datetime | None) -> Steps[list[str]]:
        if not isinstance(flow_id, str) or (yield from self._late(deadline)):
            return []
        removed: list[Doc | None] = []
        for doc in (yield Find("items", {"flow_id": flow_id}, _RUNNING)):
            fence = {"_id": doc["_id"], "generation": doc.get("generation")}
            if (yield Call("items", "delete_one", (fence,))).deleted_count:
                removed.append(doc)
        yield from self._keep_running(removed)
        return sorted(str(doc["_id"]) for doc in removed if doc is not None)

    def next_due(self, routes: Collection[str], after: datetime | None) -> Steps[datetime | None]:
        found: Doc = {"route": {"$in": sorted(routes)}, "bucket": 0}  # paused: route moved
        if after is not None:
            found["ready_at"] = {"$gt": after}
        sort = {"sort": [("ready_at", 1)]}
        doc = yield Call("items", "find_one", (found, {"ready_at": 1}), sort)
        return bson_utc_or_none(doc.get("ready_at")) if doc is not None else None

    # -- dead letters, quarantine --------------------------------------------------

    def dead_letters(self) -> Steps[list[DeadLetter]]:
        docs = yield Find("dead", {}, sort=[("dead_at", 1), ("_id", 1)])
        return dead_letters_from(docs, f"{self.name}_dead")

    def requeue(self, item_id: str, due: datetime) -> Steps[ScheduleItem | None]:
        due = ensure_utc(due, "requeue due")
        if not isinstance(item_id, str):
            return None
        doc = yield Call("dead", "find_one", ({"_id": item_id},))
        letters = dead_letters_from([doc] if doc is not None else [], f"{self.name}_dead")
        if not letters:
            return None
        item = letters[0].item
        return (yield from self.put(item.moved(due, item.previous), None))

    def quarantined(self) -> Steps[list[QuarantinedRecord]]:
        records = []
        for doc in (yield Find("quarantine", {}, sort=[("quarantined_at", 1)])):
            at = bson_utc_or_none(doc.get("quarantined_at"))
            records.append(
                QuarantinedRecord(
                    id=str(doc.get("item_id")),
                    reason=str(doc.get("reason")),
                    quarantined_at=at or truncate_ms(self.time.estimate()),
                    record=dict(doc.get("document") or {}),
                )
            )
        return records

    # -- steering ------------------------------------------------------------------

    def timers(self, query: TimerSelection) -> Steps[TimerPage]:
        now = yield from self.now()
        base = item_filter(query)
        infos: list[TimerInfo] = []
        by_due = [("due", 1), ("_id", 1)]
        if query.state != "dead":
            found = {**base, **state_filter(query.state, now)}
            for doc in (yield Find("items", found, sort=by_due, limit=query.limit + 1)):
                info = info_of(doc, now, (yield from self.read(doc)))
                if info is not None:
                    infos.append(info)
        if query.state in (None, "dead"):
            docs = yield Find("dead", base, sort=by_due, limit=query.limit + 1)
            infos.extend(dead_info(letter) for letter in dead_letters_from(docs, self.name))
        infos.sort(key=lambda info: (info.due, info.id))
        page = infos[: query.limit]
        more = len(infos) > query.limit
        return TimerPage(page, encode_cursor(page[-1].due, page[-1].id) if more else None)

    def history(self, item_id: str) -> Steps[list[Attempt]]:
        if not isinstance(item_id, str):
            return []
        yield from self._history([])  # records kept from a failed write go first
        return (yield from self.journal.read_steps(self.roles, item_id))

    def pause(self, item_id: str) -> Steps[bool]:
        """``MongoScheduler``'s pause: the route moved aside (no claim query reads it)."""
        if not isinstance(item_id, str):
            return False
        return (yield from pause_steps(self.roles, item_id))

    def resume(self, item_id: str) -> Steps[bool]:
        """``MongoScheduler``'s resume: the route back; an unclaimed item whose due passed is
        due now (a recurring one at its next slot after now: missed ones not replayed)."""
        if not isinstance(item_id, str):
            return False
        now = yield from self.now()
        return (yield from resume_steps(self.roles, item_id, now))


def _with_attempt(running: Attempt, attempts: object) -> Attempt:
    """``running`` numbered by the form's failed attempts before it."""
    number = attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else 0
    return Attempt(running.node, running.started, generation=running.generation, attempt=number)
