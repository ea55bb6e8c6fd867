"""Internal: :class:`MongoTimerStore` - the :class:`~flowsched.store.TimerStore` interface on a
pymongo ``Collection``, in the documents ``MongoScheduler`` writes (``mongo/documents.py``).

Items: one document each (``_id`` the item id, a random 63-bit ``generation``, ``ready_at``
= due, or the lease's end while claimed, ``claim: {owner, token, lease_until}``), plus
``paused: true`` while paused. Dead letters in ``<name>_dead``, unusable documents in
``<name>_quarantine`` (moved there, with the reason, when read), the history in
``<name>_history`` (:mod:`flowsched.mongo.timer_history`).

A claim is taken by one conditional update (exactly one node wins it); every later
claim-side write is fenced by the claim's identity, ``_id``, ``generation``, ``claim.owner``
and ``claim.token``, in its filter (a confirm or a renewal also by ``claim.lease_until``
after the latest the database's time can be), never by equality with a lease end: a stale
claim's write matches nothing, and a renewal whose reply was lost leaves the claim valid.
Times are the database's, in milliseconds (BSON dates): measured with
``hello`` through a :class:`~flowsched.store.measured_clock.MeasuredClock` (due judged by
the earliest it can be, leases and deadlines by the latest), or the injected clock's when
one is given. A ``deadline`` is checked before the write is sent (the test server's
``$$NOW`` cannot be trusted, and mongomock has none). Not the fast path: a claim
reads its candidates, then takes each with one conditional update.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Collection as Routes
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection

from flowsched.clock import Clock, ensure_utc
from flowsched.errors import MalformedDocument, SchedulerUnavailable
from flowsched.mongo.documents import (
    bson_utc,
    dead_letter_document,
    dead_letters_from,
    item_document,
    new_generation,
    quarantine_document,
    stored_item,
    truncate_ms,
)
from flowsched.mongo.timer_errors import outages
from flowsched.mongo.timer_history import UNPAUSED, AttemptLog, info_of, item_filter, state_filter
from flowsched.outcomes import Completed, DeadLettered, NextSlot, Outcome, Redeliver
from flowsched.records import DeadLetter, ScheduleItem, set_generation
from flowsched.steering import Attempt, AttemptOutcome, TimerInfo, TimerPage
from flowsched.store.info import dead_info
from flowsched.store.measured_clock import MeasuredClock
from flowsched.store.paging import encode_cursor
from flowsched.store.records import (
    Claim,
    QuarantinedRecord,
    Settlement,
    SettleResult,
    TimerSelection,
)

__all__ = ["MongoTimerStore"]

log = logging.getLogger("flowsched.mongo")

Doc = dict[str, Any]


class MongoTimerStore:
    """Timers in ``collection`` (a pymongo ``Collection``) behind the store interface."""

    def __init__(
        self, collection: Collection[Doc], *, clock: Clock | None = None, history_limit: int = 20
    ) -> None:
        find = getattr(collection, "find_one_and_delete", None)
        if find is None or inspect.iscoroutinefunction(find):
            raise TypeError(
                f"MongoTimerStore: collection must be a pymongo Collection (from MongoClient, "
                f"not AsyncMongoClient), got {type(collection).__name__}"
            )
        self.collection = collection
        self.time = MeasuredClock(clock, self._server_time, what="MongoDB")
        database = collection.database
        self.dead: Collection[Doc] = database[f"{collection.name}_dead"]
        self.quarantine: Collection[Doc] = database[f"{collection.name}_quarantine"]
        self.history_log = AttemptLog(database[f"{collection.name}_history"], history_limit)
        collection.create_index([("route", ASCENDING), ("ready_at", ASCENDING)])
        collection.create_index([("due", ASCENDING), ("_id", ASCENDING)])

    def __repr__(self) -> str:
        return f"MongoTimerStore({self.collection.full_name})"

    def _server_time(self) -> datetime | None:
        try:
            reply = self.collection.database.command("hello")
        except NotImplementedError:  # mongomock
            return None
        local = reply.get("localTime")
        return bson_utc(local) if isinstance(local, datetime) else None

    def now(self) -> datetime:
        """The database's time (the injected clock's, when one was given)."""
        return truncate_ms(self.time.now())

    def _late(self, deadline: datetime | None) -> bool:
        """Whether the database's time may be past ``deadline`` (checked before sending)."""
        return deadline is not None and self.time.latest() > deadline

    # -- items ---------------------------------------------------------------------

    @outages
    def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        if not isinstance(item, ScheduleItem):
            raise TypeError(f"put: expected a ScheduleItem, got {type(item).__name__}")
        if self._late(deadline):
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
        self.collection.replace_one({"_id": item.id}, item_document(stored, generation), True)
        self.dead.delete_one({"_id": item.id})
        return stored

    def _read(self, doc: Mapping[str, Any] | None) -> tuple[ScheduleItem, int] | None:
        """The item and attempts of ``doc``; a malformed one is quarantined (None)."""
        if doc is None:
            return None
        try:
            stored = stored_item(doc)
        except MalformedDocument as exc:
            self._quarantine(doc, str(exc))
            return None
        return stored.item, stored.attempts

    def _quarantine(self, doc: Mapping[str, Any], reason: str) -> None:
        log.error("quarantined %r: %s", doc.get("_id"), reason)
        record = quarantine_document(doc, reason, "store", self.now())
        self.quarantine.insert_one(record)
        self.collection.delete_one({"_id": doc.get("_id"), "generation": doc.get("generation")})

    @outages
    def get(self, item_id: str) -> ScheduleItem | None:
        if not isinstance(item_id, str):
            return None
        read = self._read(self.collection.find_one({"_id": item_id}))
        return read[0] if read is not None else None

    @outages
    def exists(self, item_id: str) -> bool:
        return isinstance(item_id, str) and self.collection.count_documents({"_id": item_id}) > 0

    @outages
    def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        if not isinstance(item_id, str) or self._late(deadline):
            return False
        found: Doc = {"_id": item_id}
        if generation is not None:
            found["generation"] = generation
        return self.collection.delete_one(found).deleted_count == 1

    @outages
    def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        if not isinstance(flow_id, str) or self._late(deadline):
            return []
        removed = []
        for doc in self.collection.find({"flow_id": flow_id}, {"_id": 1, "generation": 1}):
            if self.collection.delete_one(doc).deleted_count:
                removed.append(str(doc["_id"]))
        return sorted(removed)

    # -- claims --------------------------------------------------------------------

    @outages
    def claim_due(
        self, routes: Routes[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        if lease <= timedelta(0) or limit < 1:
            raise ValueError(f"claim_due: lease {lease} and limit {limit!r} must be positive")
        until = truncate_ms(self.time.now() + lease)
        # Due by the earliest the database's time can be: never early.
        earliest = truncate_ms(self.time.earliest())
        found = {"route": {"$in": list(routes)}, "ready_at": {"$lte": earliest}, **UNPAUSED}
        claims: list[Claim] = []
        for doc in self.collection.find(found).sort([("ready_at", 1), ("_id", 1)]).limit(limit):
            read = self._read(doc)
            if read is None:
                continue
            item, attempts = read
            old = doc.get("claim")
            fence = {"_id": item.id, "generation": item.generation, "claim": old, **UNPAUSED}
            token = uuid.uuid4().hex
            taken = self.collection.update_one(
                fence,
                {
                    "$set": {
                        "claim": {"owner": owner, "token": token, "lease_until": until},
                        "ready_at": until,
                    }
                },
            )
            if not taken.modified_count:
                continue  # another node was first
            if isinstance(old, Mapping) and isinstance(old.get("lease_until"), datetime):
                self.history_log.ended(
                    item.id,
                    node=str(old.get("owner")),
                    generation=item.generation,
                    attempt=attempts,
                    ended=bson_utc(old["lease_until"]),
                    outcome="lapsed",
                )
            claims.append(Claim(item, attempts, owner, until, token))
        return claims

    @staticmethod
    def _fence(claim: Claim) -> Doc:
        return {
            "_id": claim.item.id,
            "generation": claim.generation,
            "claim.owner": claim.owner,
            "claim.token": claim.token,
        }

    def _live(self, claim: Claim) -> Doc:
        """The fence of ``claim`` while its stored lease has surely not ended."""
        latest = truncate_ms(self.time.latest())
        return {**self._fence(claim), "claim.lease_until": {"$gt": latest}}

    @outages
    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        now = self.now()
        held = []
        for claim in claims:
            marked = self.collection.update_one(  # a lease that may have ended: not started
                {**self._live(claim), **UNPAUSED},
                {"$set": {"deliveries": claim.attempt + 1}},
            )
            if marked.matched_count:
                self.history_log.started(
                    claim.item.id, claim.generation, claim.attempt, claim.owner, now
                )
                held.append(claim)
        return held

    @outages
    def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        until = truncate_ms(self.now() + lease)
        renewed = []
        for claim in claims:
            moved = self.collection.update_one(
                self._live(claim), {"$set": {"claim.lease_until": until, "ready_at": until}}
            )
            if moved.matched_count:
                renewed.append(Claim(claim.item, claim.attempt, claim.owner, until, claim.token))
        return renewed

    @outages
    def release(self, claims: Sequence[Claim]) -> int:
        released = 0
        for claim in claims:
            fields: Doc = {"claim": None, "ready_at": truncate_ms(claim.item.due)}
            freed = self.collection.update_one(
                self._fence(claim), {"$set": fields | _unapplied(claim)}
            )
            released += freed.matched_count
        return released

    @outages
    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        now = self.now()
        results = []
        for settlement in settlements:
            claim = settlement.claim
            ends = claim.lease_until
            if now > ends:  # late by the claim: the stored lease may have been renewed since
                held = self.collection.find_one(self._fence(claim), {"claim.lease_until": 1})
                ends = bson_utc((held or {}).get("claim", {}).get("lease_until", ends))
            if not self._apply(claim, settlement.outcome):
                results.append(SettleResult(claim, False))
                continue
            error = _error_of(settlement.outcome)
            ended: AttemptOutcome = (
                "timed_out" if settlement.timed_out else "failed" if error else "succeeded"
            )
            self.history_log.ended(
                claim.item.id,
                node=claim.owner,
                generation=claim.generation,
                attempt=claim.attempt,
                ended=now,
                outcome=ended,
                error=error,
                traceback=settlement.traceback,
            )
            late = now - ends if now > ends else None
            results.append(SettleResult(claim, True, late))
        return results

    def _apply(self, claim: Claim, outcome: Outcome) -> bool:
        fence = self._fence(claim)
        if isinstance(outcome, Completed):
            return self.collection.delete_one(fence).deleted_count == 1
        if isinstance(outcome, Redeliver | NextSlot):
            due = truncate_ms(outcome.due)
            fields: Doc = {"due": due, "ready_at": due, "claim": None}
            if isinstance(outcome, Redeliver):
                fields |= {"attempts": outcome.attempt, "deliveries": outcome.attempt}
                fields["last_error"] = outcome.error
                fields |= _unapplied(claim)
            else:
                fields |= {"attempts": 0, "deliveries": 0, "last_error": outcome.error}
                fields["applied"] = truncate_ms(outcome.applied) if outcome.applied else None
                if outcome.runs is not None:  # the run is counted in the write of its slot
                    fields["runs"] = outcome.runs
            return self.collection.update_one(fence, {"$set": fields}).matched_count == 1
        # DeadLettered, Exhausted: set aside with the reason.
        if self.collection.find_one_and_delete(fence) is None:
            return False
        self.dead.replace_one({"_id": claim.item.id}, dead_letter_document(outcome.dead), True)
        return True

    @outages
    def next_due(self, routes: Routes[str], after: datetime | None = None) -> datetime | None:
        found: Doc = {"route": {"$in": list(routes)}, **UNPAUSED}
        if after is not None:
            found["ready_at"] = {"$gt": after}
        doc = self.collection.find_one(found, {"ready_at": 1}, sort=[("ready_at", 1)])
        value = doc.get("ready_at") if doc is not None else None
        return bson_utc(value) if isinstance(value, datetime) else None

    # -- dead letters, quarantine --------------------------------------------------

    @outages
    def dead_letters(self) -> list[DeadLetter]:
        docs = self.dead.find().sort([("dead_at", 1), ("_id", 1)])
        return dead_letters_from(docs, self.dead.full_name)

    @outages
    def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        due = ensure_utc(due, "requeue due")
        doc = self.dead.find_one({"_id": item_id}) if isinstance(item_id, str) else None
        letters = dead_letters_from([doc] if doc is not None else [], self.dead.full_name)
        if not letters:
            return None
        item = letters[0].item
        return self.put(item.moved(due, item.previous))

    @outages
    def quarantined(self) -> list[QuarantinedRecord]:
        records = []
        for doc in self.quarantine.find().sort("quarantined_at", 1):
            at = doc.get("quarantined_at")
            records.append(
                QuarantinedRecord(
                    id=str(doc.get("item_id")),
                    reason=str(doc.get("reason")),
                    quarantined_at=bson_utc(at) if isinstance(at, datetime) else self.now(),
                    record=dict(doc.get("document") or {}),
                )
            )
        return records

    # -- steering ------------------------------------------------------------------

    @outages
    def timers(self, query: TimerSelection) -> TimerPage:
        now = self.now()
        base = item_filter(query)
        infos: list[TimerInfo] = []
        if query.state != "dead":
            found = {**base, **state_filter(query.state, now)}
            docs = self.collection.find(found).sort([("due", 1), ("_id", 1)])
            for doc in docs.limit(query.limit + 1):
                info = info_of(doc, now, self._read(doc))
                if info is not None:
                    infos.append(info)
        if query.state in (None, "dead"):
            docs = self.dead.find(base).sort([("due", 1), ("_id", 1)]).limit(query.limit + 1)
            for letter in dead_letters_from(docs, self.dead.full_name):
                infos.append(dead_info(letter))
        infos.sort(key=lambda info: (info.due, info.id))
        page = infos[: query.limit]
        more = len(infos) > query.limit
        return TimerPage(page, encode_cursor(page[-1].due, page[-1].id) if more else None)

    @outages
    def history(self, item_id: str) -> list[Attempt]:
        return self.history_log.of(item_id) if isinstance(item_id, str) else []

    @outages
    def pause(self, item_id: str) -> bool:
        if not isinstance(item_id, str):
            return False
        return (
            self.collection.update_one({"_id": item_id}, {"$set": {"paused": True}}).matched_count
            == 1
        )

    @outages
    def resume(self, item_id: str) -> bool:
        doc = self.collection.find_one({"_id": item_id}) if isinstance(item_id, str) else None
        read = self._read(doc) if doc is not None else None
        if doc is None or read is None:
            return False
        item = read[0]
        fields: Doc = {"paused": False}
        if item.recurrence is None:
            now = truncate_ms(self.now())
            if doc.get("paused") is True and doc.get("claim") is None and item.due < now:
                fields |= {"due": now, "ready_at": now}  # a one-shot whose time passed: now
        else:
            now = self.now()
            try:
                following = truncate_ms(item.recurrence.next_slot(now))
            except ValueError:
                following = item.due
            if following > item.due:  # missed slots are not replayed
                fields |= {"due": following, "ready_at": following, "applied": max(item.due, now)}
        found = {"_id": item_id, "generation": item.generation}
        return self.collection.update_one(found, {"$set": fields}).matched_count == 1


def _unapplied(claim: Claim) -> Doc:
    """For a recurring claim that goes back to waiting for its slot (redelivered, released):
    ``applied`` and ``runs`` set back to the claimed form's (as ``mongo/settlement.py`` does
    after a slot fence), so a slot that did not run is not counted."""
    item = claim.item
    if item.recurrence is None:
        return {}
    previous = truncate_ms(item.previous) if item.previous is not None else None
    return {"applied": previous, "runs": item.runs}


def _error_of(outcome: Outcome) -> str | None:
    if isinstance(outcome, Redeliver | NextSlot):
        return outcome.error
    if isinstance(outcome, DeadLettered):
        return outcome.dead.error
    return None
