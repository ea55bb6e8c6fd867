"""Internal: the firing path of the MongoDB timer stores - claim, confirm, renew, release,
settle - as procedures without I/O (:mod:`flowsched.mongo.commands`), run by
:class:`~flowsched.mongo.timer_store.MongoTimerStore` (pymongo's ``Collection``) and
:class:`~flowsched.mongo.async_timer_store.AsyncMongoTimerStore` (``AsyncCollection``).

Round trips, per call whatever the number of claims (ids in chunks of
:data:`~flowsched.mongo.store.ID_CHUNK`, every chunk one operation of one ``bulk_write``).
A claim batch stores one token in the documents it claims, as ``MongoScheduler`` does
(:mod:`flowsched.mongo.timer_writes`); so the batch's writes are ``update_many`` /
``delete_many`` by ``_id`` in a chunk and that token, cheaper on the server than one
operation per document:

* ``claim_due``: 2 (3 when, after a full batch, the range up to its reach comes up short:
  :class:`~flowsched.mongo.timer_query.ClaimReach`) - one ``find`` of the candidates (index
  ``route, bucket, ready_at``, its order: due by the earliest the database's time can be,
  ``limit``; a paused item's route is moved aside, so none is read), then one
  ``update_many`` per chunk, ``_id`` in the candidates *and* ``generation`` and ``ready_at``
  among the values read (so a document replaced, re-claimed, renewed or redelivered since
  the read is not taken), setting the batch's fresh token, the owner and the lease end
  (``ready_at`` = lease end). Each document is taken atomically: one node wins it. When it
  took every candidate, the documents read are the ones claimed; otherwise - or when some
  are recurring, whose slot another node may have settled since the read - one more ``find``
  by token reads what was won. A won document whose earlier claim had started
  (``claim.at``) ends that attempt ``"lapsed"`` in the history (one more write, only
  then), and its ``update_many`` (one per count and chunk) sets ``lapses`` one more than
  read (the claim's :attr:`~flowsched.store.Claim.lapsed`; a settle that keeps the item
  removes it). The generation is kept.
* ``claim_started``: as ``claim_due``, its ``update_many`` also setting ``claim.at`` (the
  start) and ``deliveries`` = attempt + 1 (one write per attempt count and chunk): the
  claims returned are started, so a node that starts on claim sends no ``confirm_start``.
* ``confirm_start``: 1 - one ``update_many`` per claim batch (and chunk), fenced on the
  claims' identity, their route (not paused) and a stored lease that has surely not ended
  (``claim.lease_until`` after the latest the database's time can be), setting
  ``deliveries`` = attempt + 1 and ``claim.at`` = the start (the running attempt
  ``history`` shows, and the start the settle's record keeps). A second ``find`` only when
  some were refused, to tell which.
* ``renew``: 1 (2 when some were refused), fenced as ``confirm_start`` (a paused item's
  running claim renews). ``release``: 1 (one update per claim: each goes back to its due).
* ``settle``: 1 (2 on a server before MongoDB 8.0) - the outcomes (completed items one
  ``delete_many`` per batch and chunk, a redelivery or next slot one update each) fenced on
  the claim's identity (``settled_claim`` = token and this call's mark tells, only when the
  counts come up short, which applied: one more ``find``), with the attempts that ended on
  ``<name>_history`` in the same client-level ``bulkWrite``, else in a ``bulk_write`` each
  (:meth:`~flowsched.mongo.history.MongoHistory.settle_steps`). A dead letter (rare) takes 3
  of its own: the fence read, the letter, the fenced delete
  (:mod:`flowsched.mongo.dead_letters`). A late settle reads the stored leases first (1); a
  late completion whose claim no longer holds, 2 more (:mod:`flowsched.mongo.timer_late`).

History failures never fail the firing path: records whose write failed ride on the next.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, cast

from pymongo.errors import BulkWriteError, WriteError

from flowsched.clock import capped
from flowsched.errors import MalformedDocument
from flowsched.mongo.commands import Call, Counts, Find, Steps, Write, counted_write_steps
from flowsched.mongo.dead_letters import DeadLetters
from flowsched.mongo.documents import (
    bson_utc,
    bson_utc_or_none,
    dead_letter_document,
    stored_item,
    truncate_ms,
)
from flowsched.mongo.history import MongoHistory, Record
from flowsched.mongo.quarantine import StorePoison
from flowsched.mongo.store import MongoCollections
from flowsched.mongo.timer_late import late_completions
from flowsched.mongo.timer_query import ClaimReach
from flowsched.mongo.timer_writes import (
    batch_of,
    chunks,
    claim_fence,
    distinct,
    ended_record,
    has_started,
    held_writes,
    is_gone,
    lapses_of,
    owner_token,
    settle_write,
    unapplied,
)
from flowsched.outcomes import Completed, DeadLettered, Exhausted, NextSlot, Redeliver
from flowsched.records import ScheduleItem
from flowsched.store.measured_clock import MeasuredClock
from flowsched.store.records import Claim, Settlement, SettleResult

__all__ = ["ClaimSteps", "Doc"]

Doc = dict[str, Any]
STARTS_KEPT = 100_000
"""The most start times a store remembers for claims not settled yet (the oldest go)."""


class ClaimSteps:
    """The claim-side procedures of one store (see the module docstring); the base of
    :class:`~flowsched.mongo.timer_ops.TimerSteps`."""

    roles: MongoCollections
    time: MeasuredClock
    journal: MongoHistory
    served: Any
    """The bucket condition of this store's claims: the buckets it serves."""
    poison: StorePoison

    def __init__(self) -> None:
        self._starts: OrderedDict[tuple[str, str], datetime] = OrderedDict()
        self._starts_lock = threading.Lock()
        self.letters = DeadLetters()  # mongo/dead_letters.py
        self.reach = ClaimReach()

    # -- time, documents ---------------------------------------------------------------

    def measure(self) -> Steps[None]:
        """Sample the database's time when one is due (``hello``; none with a clock)."""
        clock = self.time
        if not clock.wants_sample():
            return
        node = clock.node
        started, at = node.monotonic(), node.now()
        try:
            reply = yield Call("database", "command", ("hello",))
        except NotImplementedError:  # mongomock
            reply = None
        local = reply.get("localTime") if isinstance(reply, Mapping) else None
        clock.sample(started, node.monotonic(), at, bson_utc_or_none(local))

    def read(self, doc: Doc, *, found: bool = False) -> Steps[tuple[ScheduleItem, int] | None]:
        """The item and attempts of ``doc``, read by a claim (``found``: by its query, so
        first checked as :func:`~flowsched.mongo.quarantine.claim_problem` does); an unusable
        one is moved aside (:class:`~flowsched.mongo.quarantine.StorePoison`): ``None``."""
        problem = self.poison.problem(doc) if found else None
        if problem is None:
            try:
                stored = stored_item(doc)
            except MalformedDocument as exc:
                problem = exc.reason
            else:
                return stored.item, stored.attempts
        yield from self.poison.set_aside([(doc, problem)], truncate_ms(self.time.estimate()))
        return None

    def _writes(self, role: str, writes: Sequence[Write]) -> Steps[Counts]:
        if role == "items":  # every filter on the items names the bucket (the shard key)
            writes = [replace(w, filter=self.roles.keyed(w.filter)) for w in writes]
        return (yield from counted_write_steps(role, writes, self.roles.bulk, copies=True))

    def _history(self, records: list[Record]) -> Steps[None]:
        """Write ``records`` and any kept from a failed write (never raises an Exception)."""
        records = self.journal.take() + records
        yield from self.journal.write_steps(self.roles, records)

    # -- claims ------------------------------------------------------------------------

    def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> Steps[list[Claim]]:
        return (yield from self._claim(routes, owner, lease, limit, started=False))

    def claim_started(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> Steps[list[Claim]]:
        """:meth:`claim_due` and :meth:`confirm_start` in the claim's own ``update_many``:
        it also sets ``deliveries`` = attempt + 1 and ``claim.at`` (a start recorded), so the
        claims returned are started; the node core's ``start_on_claim``."""
        return (yield from self._claim(routes, owner, lease, limit, started=True))

    def _claim(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int, started: bool
    ) -> Steps[list[Claim]]:
        what = "claim_started" if started else "claim_due"
        if lease <= timedelta(0) or limit < 1:
            raise ValueError(f"{what}: lease {lease} and limit {limit!r} must be positive")
        wanted = sorted(routes)
        if not wanted:
            return []
        yield from self.measure()
        current = self.time.now()
        now, until = truncate_ms(current), truncate_ms(capped(current, lease))
        earliest = truncate_ms(self.time.earliest())  # due by the earliest: never early
        # Documents no claim query finds (no date ready_at, no kind): at the first claim and
        # on this node's turns (mongo/quarantine.py).
        yield from self.poison.audit_steps(now, self.time.node.monotonic())
        due: dict[Any, tuple[Doc, ScheduleItem, int]] = {}
        while not due:  # again while every candidate read was quarantined (and so removed)
            # One index range per route and bucket, up to the reach (timer_query.py).
            docs = yield from self.reach.steps(wanted, self.roles.served, earliest, limit)
            if not docs:
                return []
            for doc in docs:
                read = yield from self.read(doc, found=True)
                if read is not None:
                    due[doc["_id"]] = (doc, *read)
        batch = uuid.uuid4().hex
        claim: Doc = {"owner": owner, "token": batch, "lease_until": until}
        if started:
            claim["at"] = now
        # A document whose earlier claim had started (claim.at) and lapsed counts one more
        # lost run (lapses; any change since the read moved ready_at, which the claim is
        # fenced on); started claims set deliveries = attempts + 1. One write per attempt
        # count (started claims), lost runs written (None: none, left as stored) and chunk.
        lost = {key for key, (doc, _, _) in due.items() if has_started(doc.get("claim"))}
        lapses = {key: lapses_of(doc) + (key in lost) for key, (doc, _, _) in due.items()}
        groups: dict[tuple[int, int | None], list[tuple[Doc, ScheduleItem, int]]] = {}
        for key, entry in due.items():
            count = lapses[key] if key in lost else None
            groups.setdefault((entry[2] if started else -1, count), []).append(entry)
        writes = [
            # As read: a document replaced (a fresh generation), claimed, renewed or
            # settled (ready_at moved to the future) since is not taken.
            Write(
                {
                    "_id": {"$in": [doc["_id"] for doc, _, _ in chunk]},
                    "generation": {"$in": distinct(item.generation for _, item, _ in chunk)},
                    "ready_at": {"$in": distinct(doc["ready_at"] for doc, _, _ in chunk)},
                    "route": {"$in": wanted},
                    **({"attempts": attempts or {"$in": [0, None]}} if started else {}),
                },
                {
                    "$set": {
                        "claim": claim,
                        "ready_at": until,
                        **({"deliveries": attempts + 1} if started else {}),
                        **({} if count is None else {"lapses": count}),
                    }
                },
                many=True,
            )
            for (attempts, count), group in groups.items()
            for chunk in chunks(group)
        ]
        removed = 0
        try:
            taken = (yield from self._writes("items", writes)).matched
        except (BulkWriteError, WriteError) as exc:  # one by one; the refused set aside
            as_read = {key: doc for key, (doc, _, _) in due.items()}
            removed = yield from self.poison.refused_steps(writes, as_read, exc, now)
            taken = -1  # read back what was won
        recurring = any(item.recurrence is not None for _, item, _ in due.values())
        if taken < len(due) or recurring:
            # Read back what was won (and the recurring items as claimed: a slot settled
            # since the read, under the same generation, is not run twice).
            mark = self.roles.keyed({"_id": {"$in": list(due)}, "claim.token": batch})
            back: list[Doc] = [] if not taken else (yield Find("items", mark))
            won = {}
            for doc in back:
                read = yield from self.read(doc)
                if read is not None and doc["_id"] in due:
                    won[doc["_id"]] = (due[doc["_id"]][0], *read)
            due = {key: won[key] for key in due if key in won}  # in the order read
            if not due and removed:  # what was set aside takes no place from good ones
                return (yield from self._claim(routes, owner, lease, limit, started))
        lapsed = [doc for key, (doc, _, _) in due.items() if key in lost]
        if lapsed:  # earlier claims that started and never settled: they lapsed
            for doc in lapsed:
                self.journal.lapsed(doc, lease)
            yield from self._history([])
        claims = [
            Claim(item, attempts, owner, until, f"{batch}-{n}", lapses[key])
            for n, (key, (_, item, attempts)) in enumerate(due.items())
        ]
        if started:
            self._started(claims, now)
        return claims

    def confirm_start(self, claims: Sequence[Claim]) -> Steps[list[Claim]]:
        if not claims:
            return []
        yield from self.measure()
        now = truncate_ms(self.time.now())
        latest = truncate_ms(self.time.latest())
        live = {"claim.lease_until": {"$gt": latest}}  # and not paused: its route is moved
        by_attempt: dict[int, list[Claim]] = {}
        for c in claims:
            by_attempt.setdefault(c.attempt, []).append(c)
        writes = [
            write
            for attempt, some in by_attempt.items()
            for write in held_writes(
                some, live, {"deliveries": attempt + 1, "claim.at": now}, unpaused=True
            )
        ]
        matched = (yield from self._writes("items", writes)).matched
        held = yield from self._which(claims, matched, {"claim.at": now})
        self._started(held, now)
        return held

    def _started(self, claims: Sequence[Claim], now: datetime) -> None:
        """Remember when ``claims`` started: their settle closes that attempt."""
        with self._starts_lock:
            for c in claims:
                self._starts[(c.item.id, c.token)] = now
            while len(self._starts) > STARTS_KEPT:
                self._starts.popitem(last=False)

    def _which(self, claims: Sequence[Claim], matched: int, mark: Doc) -> Steps[list[Claim]]:
        """Of ``claims``, those a batch that matched ``matched`` of them changed: all, none,
        or (one ``find``) those whose document carries their identity and ``mark``."""
        if matched >= len(claims):
            return list(claims)
        if not matched:
            return []
        ids = distinct(c.item.id for c in claims)
        fields = {"generation": 1, "claim.owner": 1, "claim.token": 1}
        found: list[Doc] = yield Find(
            "items", self.roles.keyed({"_id": {"$in": ids}, **mark}), fields
        )
        marked = {(d["_id"], d.get("generation"), *owner_token(d)) for d in found}
        return [c for c in claims if (c.item.id, c.generation, c.owner, batch_of(c)) in marked]

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> Steps[list[Claim]]:
        if not claims:
            return []
        yield from self.measure()
        until = truncate_ms(capped(self.time.now(), lease))
        live = {"claim.lease_until": {"$gt": truncate_ms(self.time.latest())}}
        writes = held_writes(claims, live, {"claim.lease_until": until, "ready_at": until})
        matched = (yield from self._writes("items", writes)).matched
        renewed = yield from self._which(claims, matched, {"claim.lease_until": until})
        return [Claim(c.item, c.attempt, c.owner, until, c.token, c.lapsed) for c in renewed]

    def release(self, claims: Sequence[Claim]) -> Steps[int]:
        writes = [
            Write(
                claim_fence(c),
                {"$set": {"claim": None, "ready_at": truncate_ms(c.item.due), **unapplied(c)}},
            )
            for c in claims
        ]
        return (yield from self._writes("items", writes)).matched

    # -- settle ------------------------------------------------------------------------

    def settle(self, settlements: Sequence[Settlement]) -> Steps[list[SettleResult]]:
        if not settlements:
            return []
        yield from self.measure()
        now = truncate_ms(self.time.now())
        leases = yield from self._stored_leases([s.claim for s in settlements], now)
        plain = [s for s in settlements if isinstance(s.outcome, Completed | Redeliver | NextSlot)]
        mark = uuid.uuid4().hex  # this call's: a repeated settle's update is not counted
        deletes = [s.claim for s in plain if isinstance(s.outcome, Completed)]
        writes = held_writes(deletes, {}, None)  # completed: deleted, a batch at a time
        writes += [settle_write(s, mark) for s in plain if not isinstance(s.outcome, Completed)]
        records = []  # the runs that ended: their attempts too, stale (cancelled) or not
        with self._starts_lock:
            for s in settlements:
                started = self._starts.pop((s.claim.item.id, s.claim.token), None)
                if started is not None:
                    records.append((s.claim.item.id, ended_record(s, started, now)))
        keyed = [replace(w, filter=self.roles.keyed(w.filter)) for w in writes]
        items = partial(self._writes, "items")
        history = self.journal.take() + records  # and any a failed write kept
        counts = yield from self.journal.settle_steps(self.roles, keyed, history, items)
        applied = yield from self._applied(plain, counts, mark)
        yield from late_completions(plain, applied, self.roles)
        dead = [s for s in settlements if id(s) not in applied]  # DeadLettered, Exhausted
        for s in dead:
            letter = dead_letter_document(cast(DeadLettered | Exhausted, s.outcome).dead)
            token, fence = s.claim.token, self.roles.keyed(claim_fence(s.claim))
            applied[id(s)] = yield from self.letters.steps(self.roles, letter, token, fence)
        self.letters.settled((s.claim.item.id, s.claim.token) for s in dead)
        results = []
        for s in settlements:
            claim = s.claim
            if not applied[id(s)]:
                results.append(SettleResult(claim, False))
                continue
            ends = leases.get((claim.item.id, batch_of(claim)), claim.lease_until)
            results.append(SettleResult(claim, True, now - ends if now > ends else None))
        return results

    def _stored_leases(
        self, claims: Sequence[Claim], now: datetime
    ) -> Steps[dict[tuple[Any, str], datetime]]:
        """The stored lease ends of the claims late by their own (a renewal whose reply was
        lost may have moved them): one ``find``, only when some are late."""
        late = [c.item.id for c in claims if now > c.lease_until]
        if not late:
            return {}
        found: list[Doc] = yield Find(
            "items", self.roles.keyed({"_id": {"$in": distinct(late)}}), {"claim": 1}
        )
        leases = {}
        for doc in found:
            claim = doc.get("claim")
            if isinstance(claim, Mapping) and isinstance(claim.get("lease_until"), datetime):
                leases[(doc["_id"], str(claim.get("token")))] = bson_utc(claim["lease_until"])
        return leases

    def _applied(
        self, plain: Sequence[Settlement], counts: Counts, mark: str
    ) -> Steps[dict[int, bool]]:
        """Which of ``plain`` (by ``id()``) the batch applied: all when the counts say so;
        else one ``find``: an update applied if its document carries this call's ``mark``
        and its token in ``settled_claim``, a delete if its document is gone (or of another
        generation) and no cancel or replace removed it (:meth:`_removed_running`) - when
        the deletes counted still cannot tell which, none is said applied."""
        deletes = [s for s in plain if isinstance(s.outcome, Completed)]
        updates = [s for s in plain if not isinstance(s.outcome, Completed)]
        if counts.matched == len(updates) and counts.deleted == len(deletes):
            return {id(s): True for s in plain}
        ids = distinct(s.claim.item.id for s in plain)
        fields = {"generation": 1, "settled_claim": 1}
        found: list[Doc] = yield Find("items", self.roles.keyed({"_id": {"$in": ids}}), fields)
        docs = {doc["_id"]: doc for doc in found}
        applied = {}
        for s in updates:
            doc = docs.get(s.claim.item.id) or {}
            ours = doc.get("generation") == s.claim.generation
            applied[id(s)] = ours and doc.get("settled_claim") == f"{s.claim.token}/{mark}"
        gone = [s for s in deletes if is_gone(docs.get(s.claim.item.id), s.claim)]
        removed: set[int] = set()
        if counts.deleted < len(gone):
            removed = yield from self._removed_running(gone)
        ours = counts.deleted == len(gone) - len(removed)
        for s in deletes:
            applied[id(s)] = ours and s in gone and id(s) not in removed
        return applied

    def _removed_running(self, gone: Sequence[Settlement]) -> Steps[set[int]]:
        """Of completions whose item is gone, those a cancel or replace removed (it kept
        their running attempt, keyed ``<claim batch's token>:kept``, in the history): one
        ``find`` on the history."""
        ids = distinct(s.claim.item.id for s in gone)
        found: list[Doc] = yield Find("history", {"_id": {"$in": ids}}, {"attempts": 1})
        running = set()
        for doc in found:
            attempts = doc.get("attempts")
            for entry in attempts if isinstance(attempts, list) else []:
                if isinstance(entry, Mapping) and entry.get("ended") is None:
                    running.add((doc["_id"], str(entry.get("k")).removesuffix(":kept")))
        return {id(s) for s in gone if (s.claim.item.id, batch_of(s.claim)) in running}
