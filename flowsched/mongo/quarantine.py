"""Internal: poison documents - what a node cannot use is moved aside, not retried (the
MongoDB timer stores' claims: :class:`StorePoison`; the sweepers' before them).

A document in the timers collection may have been written by hand, by an old or newer
version, or damaged: a sub-document ``_id``, a counter at the largest 64-bit integer, a due
time that is not a date, no ``kind``, 16 MiB of junk. None of them may stop a node or delay
the good timers. Three places look:

* the claim (:func:`claim_problem`): every document the claim query finds is checked before
  it is claimed or counted - the fields the claim itself reads or writes (``_id``,
  ``ready_at``, ``deliveries``); the claiming update of a batch that the server still refuses
  (a document at the 16 MiB limit cannot take a claim) is retried per document, and the ones
  refused are moved aside with the server's reason;
* the batch, after the claim: the whole document (:func:`~flowsched.mongo.documents.
  stored_item`); a malformed one is settled as quarantined under its claim;
* the audit (:class:`Audit`): documents the claim query can never find - ``ready_at``, ``due``
  not dates, ``kind`` missing or not text - found by an infrequent query (no index can serve
  it: it reads the collection): by each node at its first claim, then by one node of the
  collection at a time about every :data:`AUDIT_EVERY` - the nodes take turns through one
  conditional update in ``<collection>_settings``, so the collection is read once per
  period, however many nodes there are.

Moving aside = one record in ``<collection>_quarantine`` (the original as far as 16 MiB
allows, the reason, the node, the time; see :func:`~flowsched.mongo.documents.
quarantine_document`), then deleting the original fenced on the values read, so a timer
scheduled under that id meanwhile is left alone. Records have a deterministic ``_id``: two
nodes quarantining one document write one record, and only the node that wrote it logs an
error.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, WriteError

from flowsched.clock import capped
from flowsched.errors import MalformedDocument
from flowsched.limits import check_id
from flowsched.mongo.commands import Call, Find, Steps, Write
from flowsched.mongo.documents import (
    MAX_COUNT,
    bucket_of,
    quarantine_document,
    short_repr,
    stored_item,
)
from flowsched.mongo.store import Doc, TimerStore
from flowsched.mongo.transient import is_transient
from flowsched.records import ScheduleItem

__all__ = [
    "AUDIT_EVERY",
    "AUDIT_LIMIT",
    "Audit",
    "Quarantiner",
    "StorePoison",
    "claim_problem",
    "readable",
]

log = logging.getLogger("flowsched.mongo")

AUDIT_EVERY = timedelta(minutes=5)
"""How often one node of the collection looks for documents the claim query can never find."""

AUDIT_LIMIT = 100
"""Most documents one audit moves aside (the next audit takes the rest)."""

CLAIM_FIELDS = ("_id", "bucket", "ready_at", "deliveries")
"""What the claim query reads of each document it finds (and all :func:`claim_problem` needs)."""


def claim_problem(doc: Mapping[str, Any], buckets: int = 1) -> str | None:
    """Why ``doc`` (as the claim query read it) must not be claimed; ``None`` if it may be.

    ``buckets``: the collection's bucket count. A document stored in another bucket than
    its id's is found by the claim query but can never be claimed (the claiming update
    names the id's bucket): left there, it would be found, never fire, and keep the node
    claiming as if behind."""
    try:
        check_id(doc.get("_id"), "_id")
    except ValueError as exc:
        return str(exc)
    wanted = bucket_of(doc["_id"], buckets)
    if doc.get("bucket") != wanted:
        found = short_repr(doc.get("bucket"))
        return f"bucket must be {wanted} (crc32 of _id mod {buckets}), got {found}"
    ready = doc.get("ready_at")
    if not isinstance(ready, datetime):
        return f"ready_at must be a date, got {short_repr(ready)}"
    generation = doc.get("generation")
    if generation is not None and (not isinstance(generation, int) or isinstance(generation, bool)):
        # The claim is fenced on it (a set of them): a dict here stopped every claim.
        return f"generation must be an integer, got {short_repr(generation)}"
    if "deliveries" in doc:
        value = doc["deliveries"]
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_COUNT:
            return (
                f"deliveries must be an integer >= 0 and < {MAX_COUNT} (a start mark adds to it), "
                f"got {short_repr(value)}"
            )
    return None


def _fence(doc: Doc, fields: Sequence[str]) -> dict[str, Any]:
    """A filter that matches ``doc`` only while ``fields`` still hold what was read.

    ``$eq`` throughout: an odd ``_id`` (a sub-document) is compared, never read as operators."""
    fence: dict[str, Any] = {}
    for name in fields:
        fence[name] = {"$eq": doc[name]} if name in doc else {"$exists": False}
    return fence


def _record_id(doc: Doc, fields: Sequence[str]) -> str:
    """The same for the same document as read, on every node (one record per document)."""
    seen = repr([(name, doc.get(name)) for name in fields])
    digest = hashlib.sha256(seen.encode("utf-8", "replace")).hexdigest()[:24]
    return f"{short_repr(doc.get('_id'), 80)}:{digest}"


class Quarantiner:
    """Moves unusable documents of one store aside, as node ``owner``."""

    def __init__(self, store: TimerStore, owner: str) -> None:
        self.store = store
        self.owner = owner

    def unclaimed(
        self, found: Sequence[tuple[Doc, str]], fields: Sequence[str], now: datetime
    ) -> int:
        """Move aside unclaimed unusable documents (:meth:`unclaimed_steps`)."""
        return self.store.run(self.unclaimed_steps(found, fields, now))

    def unclaimed_steps(
        self, found: Sequence[tuple[Doc, str]], fields: Sequence[str], now: datetime
    ) -> Steps[int]:
        """Move aside documents read by a query that fetched ``fields`` (``(doc, reason)``
        pairs, claimed by no one): each is re-read whole, recorded, and deleted if those
        fields still hold what was read (missing ones still missing). How many went.

        If the document changed between the re-read and the delete (another node claimed it
        - its batch then moves it aside under its claim - or it was scheduled again), the
        record this call wrote is withdrawn: one record per document, and one error line,
        logged by the node whose record stands."""
        removed = 0
        for doc, reason in found:
            fence = _fence(doc, fields)
            full = yield Call("items", "find_one", (fence,))
            if full is None:
                continue  # gone or changed since it was read: the next look decides
            record_id = _record_id(doc, fields)
            written = yield from self._write(full, reason, now, record_id)
            if written is None:
                continue  # not even a marker could be stored: the document stays
            if (yield Call("items", "delete_one", (fence,))).deleted_count:
                removed += 1
            elif (yield Call("items", "find_one", ({"_id": doc["_id"]}, {"_id": 1}))) is not None:
                if written:
                    mine = {"_id": record_id, "node": self.owner}
                    yield Call("quarantine", "delete_one", (mine,))
                continue
            if written:
                self._log(full, reason, written)
        return removed

    def _write(
        self, doc: Doc, reason: str, now: datetime, record_id: str
    ) -> Steps[dict[str, Any] | Literal[False] | None]:
        """Write the quarantine record: the record if this call wrote it, ``False`` if it was
        there already (another node, a retried write), ``None`` if none could be stored (the
        original then stays where it is, and an error is logged, until a record can be)."""
        record = quarantine_document(doc, reason, self.owner, now)
        record["_id"] = record_id
        if (yield from self.store.put_quarantined_steps([record])):
            return record
        where = short_repr(doc.get("_id"))
        there = yield Call("quarantine", "find_one", ({"_id": record_id}, {"_id": 1}))
        if there is not None:
            log.debug("%s %s was already quarantined: %s", self.store.name, where, reason)
            return False
        log.error(
            "cannot quarantine %s %s (%s): the record was refused; the document stays",
            self.store.name,
            where,
            reason,
        )
        return None

    def _log(self, doc: Doc, reason: str, record: Mapping[str, Any]) -> None:
        where = short_repr(doc.get("_id"))
        if record.get("trimmed"):
            log.error(
                "quarantining %s %s: %s (fields %s too large to keep in the record)",
                self.store.name,
                where,
                reason,
                ", ".join(map(str, record["trimmed"])),
            )
        else:
            log.error("quarantining %s %s: %s", self.store.name, where, reason)


class Audit:
    """Finds, now and then, documents the claim query can never find, and moves them aside."""

    QUERY: ClassVar[dict[str, Any]] = {
        "$or": [
            {"kind": {"$not": {"$type": "string"}}},
            {"ready_at": {"$not": {"$type": "date"}}},
            {"due": {"$not": {"$type": "date"}}},
        ]
    }

    def __init__(self, quarantiner: Quarantiner, every: timedelta = AUDIT_EVERY) -> None:
        self.quarantiner = quarantiner
        self.every = every.total_seconds()
        self._next = 0.0  # monotonic seconds; 0: at the first chance, whoever's turn it is

    def due(self, monotonic: float) -> bool:
        return monotonic >= self._next

    def run(self, now: datetime, monotonic: float) -> int:
        """One audit, synchronously (:meth:`run_steps`)."""
        return self.quarantiner.store.run(self.run_steps(now, monotonic))

    def run_steps(self, now: datetime, monotonic: float) -> Steps[int]:
        """One audit - the node's first, or one on this node's turn (one round trip to take
        it; then one query, plus two writes per poison document found); how many went.

        The next audit is planned before the query, so a failing one is not retried at
        once on every sweep turn."""
        first = self._next == 0.0
        self._next = monotonic + self.every
        # A node's first audit runs before its first claim, so that nothing found here is
        # also being claimed by it; later ones only on this node's turn.
        if not (yield from self._take_turn(now)) and not first:
            return 0
        found = yield Find("items", self.QUERY, limit=AUDIT_LIMIT)
        if not found:
            return 0
        found_with = [(doc, _audit_reason(doc)) for doc in found]
        fields = ("_id", "bucket", "kind", "ready_at", "due")
        return (yield from self.quarantiner.unclaimed_steps(found_with, fields, now))

    def _take_turn(self, now: datetime) -> Steps[bool]:
        """Whether this node audits now: it moves the collection's next audit time from the
        past to ``now + every`` (or records the first one), as one conditional upsert. When
        another node's turn is still running (the time is in the future), the upsert's
        insert meets the existing ``_id`` and this node skips: an audit is never run by two
        nodes in one period, and is skipped rather than doubled when in doubt."""
        store = self.quarantiner.store
        try:
            taken = yield Call(
                "settings",
                "find_one_and_update",
                (
                    {"_id": "audit", "next_at": {"$lte": now}},
                    {
                        "$set": {
                            "next_at": capped(now, timedelta(seconds=self.every)),
                            "by": store.node,
                        }
                    },
                ),
                {"upsert": True, "return_document": ReturnDocument.AFTER},
            )
        except DuplicateKeyError:
            return False
        return taken is not None and taken.get("by") == store.node


def _audit_reason(doc: Doc) -> str:
    problems = []
    for name, wanted in (("kind", str), ("ready_at", datetime), ("due", datetime)):
        value = doc.get(name)
        if not isinstance(value, wanted):
            kind = "a string" if wanted is str else "a date"
            problems.append(f"{name} must be {kind}, got {short_repr(value)}")
    return "; ".join(problems)


def readable(doc: Mapping[str, Any] | None, where: str) -> tuple[ScheduleItem, int] | None:
    """The item and attempts of ``doc`` for a read that changes nothing (a timer store's
    ``get``, ``timers``): a malformed one is ``None``, logged naming ``where``; the claim
    that meets it moves it aside."""
    if doc is None:
        return None
    try:
        stored = stored_item(doc)
    except MalformedDocument as exc:
        log.error("%s: %s", where, exc)
        return None
    return stored.item, stored.attempts


READ_FIELDS = ("_id", "bucket", "generation", "ready_at", "deliveries")
"""What a timer store's move aside is fenced on: a claim, a settle or a replace since the
claim's read changes ``ready_at`` or ``generation``."""


class StorePoison:
    """The three looks of the module docstring, for a MongoDB timer store's claims
    (:mod:`flowsched.mongo.timer_claims`): the documents it found checked before they are
    claimed, the audit at its first claim and on its turns, and a claim the server refuses
    retried one document at a time. Everything is moved aside unclaimed, as ``node``."""

    def __init__(self, store: TimerStore, node: str) -> None:
        self.quarantiner = Quarantiner(store, node)
        self.audit = Audit(self.quarantiner)

    def problem(self, doc: Doc) -> str | None:
        """Why a document the claim query found cannot be claimed (:func:`claim_problem`)."""
        return claim_problem(doc, self.quarantiner.store.buckets)

    def set_aside(self, found: Sequence[tuple[Doc, str]], now: datetime) -> Steps[int]:
        """Move ``(doc, reason)`` pairs aside, each fenced on what the claim read of it."""
        return (yield from self.quarantiner.unclaimed_steps(found, READ_FIELDS, now))

    def audit_steps(self, now: datetime, monotonic: float) -> Steps[None]:
        """The audit when it is due (:class:`Audit`); one the server refuses is logged and
        tried again at its next time, never holding up the claim."""
        if not self.audit.due(monotonic):
            return
        try:
            yield from self.audit.run_steps(now, monotonic)
        except OperationFailure as exc:
            if is_transient(exc):
                raise
            name = self.quarantiner.store.name
            log.warning("audit of %s for unusable documents failed: %s", name, exc)

    def refused_steps(
        self, writes: Sequence[Write], due: Mapping[Any, Doc], refusal: Exception, now: datetime
    ) -> Steps[int]:
        """After the server refused the claiming ``writes`` (updates by ``_id: {$in}``) for
        good: each again, one document at a time; the documents (of ``due``, as read) it
        still refuses - one at the 16 MiB limit cannot take a claim - are moved aside with
        its reason; how many went. The caller reads back what was won."""
        if is_transient(refusal) or (
            isinstance(refusal, BulkWriteError) and not refusal.details.get("writeErrors")
        ):
            raise refusal
        log.warning("claim refused by the server, claiming one by one: %s", refusal)
        refused: list[tuple[Doc, str]] = []
        for write in writes:
            for item_id in write.filter["_id"]["$in"]:
                one = ({**write.filter, "_id": item_id}, copy.deepcopy(write.update))
                try:
                    yield Call("items", "update_one", one)
                except WriteError as exc:
                    if is_transient(exc):
                        raise
                    refused.append((due[item_id], f"the server refused to claim it: {exc}"[:1000]))
        return (yield from self.set_aside(refused, now)) if refused else 0
