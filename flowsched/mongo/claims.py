"""Internal: MongoDB claims (a node's lock on a due item), lease renewal and fenced settlement.

A node takes a batch of due items in two steps in the common case (one ``find`` per route
it serves, then one round trip), three when the claim lost some candidates:

1. ``find`` the ids of up to ``limit`` claimable documents of the routes it serves, oldest
   ``ready_at`` first: one ``find`` per route, ``{route: r, ready_at: {$lte: horizon}}``
   sorted by ``ready_at`` (index ``route, ready_at``: one index range each, so documents of
   routes this node does not serve are never examined), merged in due order; just after a
   full batch it stops short of the horizon (:mod:`flowsched.mongo.candidates`). A node never
   claims a document it cannot run (no claim-then-release). Each document found is checked
   before it is claimed or counted (:func:`flowsched.mongo.quarantine.claim_problem`): one that
   cannot be claimed is quarantined, unclaimed, and never holds up the others;
2. ``update_many`` those ids (one bulk write, ids in chunks) *where they are still claimable*
   (``ready_at <= now``), setting a fresh claim token, the lease's end and ``ready_at`` =
   lease end. The condition is checked per document atomically by the server, so two nodes
   never both win one document. If the
   server refuses the update for good (a document too large to take a claim), the ids are
   claimed one by one and the refused ones quarantined;
3. only if the update did not modify every candidate: ``find`` by ids and token, exactly
   the documents this node won. The first ``find`` reads whole documents, and the claiming
   update is also conditioned on the generations read, so when it modified them all, the
   documents read are the ones claimed (a document replaced meanwhile has a fresh random
   generation and is not claimed as read; one whose fields changed under the same
   generation - another node's claim and settle in between - is caught by the fenced
   settle, as every stale claim is).

Attempts count handlers that started or may have started, not claims (see
:mod:`flowsched.mongo.documents`). A fresh claim - the document carried no earlier claim -
runs its handler unmarked: if it fails, the failure is counted when its outcome is written;
if its node dies first, the document comes back at the lease's end still carrying that
claim, with no attempt counted and no backoff. A claim that finds such an earlier, unsettled
claim of another token (the claim query reads the ``claim`` field: no extra round trip) is
*suspect* (:attr:`Claim.suspect`): the earlier claimer may have started the handler and
died. Only a suspect claim is marked started (``deliveries`` = ``attempts + 1``) before its
handler runs (:meth:`Claims.settle` ``starts``, a wave of them in one bulk write); a claim
that finds that mark still there counts the lost delivery as a failure. Every normal
settlement (failure, next slot, release, requeue, replace) clears ``claim``; only lease
renewals keep it, so only lost claims look suspect.

While a handler runs, the node renews the lease (``renew``). When it stops renewing (it
died), ``ready_at`` passes and step 1 finds the document again on any node.

Every outcome is written back in one ``bulk_write`` whose filters are fenced on
``_id`` + ``generation`` + claim token: a delivery whose document was replaced
(``schedule``), cancelled, or re-claimed after its lease ran out matches nothing, so a stale
claim never deletes or reschedules what replaced it.

Recurring items take one more round trip per claimed batch that holds any (one-shot items'
round trips are unchanged): :meth:`Claims.fence_slots` moves each one's ``applied`` slot from
the value read to the slot about to run, on the condition that the claim token and the old
value still match, *before* the handler runs. A claimer whose lease ran out during a long
tick cannot make another node repeat that slot: the next claimer reads the moved ``applied``
and runs only a later slot. The price: a tick whose node died mid-run counts as applied (it
may have been), even with ``retry_failed``.

Clock skew: every ``now`` given here is the database's time
(:class:`~flowsched.mongo.server_clock.ServerClock`: the node's clock corrected by its
offset from the server), so ``due`` and ``lease_until`` are judged on one clock by every node.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from flowsched.clock import capped
from flowsched.delivery import DeadLettered
from flowsched.mongo.candidates import CandidateQuery
from flowsched.mongo.claim_start import starting_ids, take_claims_steps, with_start
from flowsched.mongo.commands import Breather, Call, Find, Steps
from flowsched.mongo.dead_letters import DeadLetters
from flowsched.mongo.documents import (
    bson_utc,
    dead_letter_document,
    optional_ms,
    truncate_ms,
)
from flowsched.mongo.history import MongoHistory, Record
from flowsched.mongo.quarantine import CLAIM_FIELDS, Quarantiner, claim_problem
from flowsched.mongo.settlement import (
    Claim,
    Quarantine,
    Settlement,
    bucket_fence,
    quarantine_record,
    settlement_writes,
    start_mark,
)
from flowsched.mongo.store import Doc, TimerStore, Write
from flowsched.mongo.transient import refused_for_good

__all__ = ["Claimed", "Claims"]

log = logging.getLogger("flowsched.mongo")

CHECK_SLICE = 25
"""Candidates a claim checks between two pauses (:class:`~flowsched.mongo.commands.Breather`:
one turn of the loop on the asyncio node, nothing on the threaded one)."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """One claim's result: the ``documents`` won under ``token`` out of ``due`` candidates,
    and when the next item not yet due becomes ready (``None``: none within the lookahead).
    ``suspects``: ``repr`` of the ids won whose document carried an earlier claim when the
    claim query read it (see :attr:`Claim.suspect`)."""

    token: str
    documents: list[Doc] = field(default_factory=list)
    due: int = 0
    next_ready: datetime | None = None
    quarantined: int = 0
    suspects: frozenset[str] = frozenset()
    lease_until: datetime | None = None
    """When the leases of ``documents`` end (database time)."""
    started: frozenset[str] = frozenset()
    """``repr`` of the ids whose start the claim recorded, at ``at`` (those won started)."""
    at: datetime | None = None


def _same_instant(stored: object, slot: datetime) -> bool:
    return isinstance(stored, datetime) and bson_utc(stored) == truncate_ms(slot)


class Claims:
    """Claim, renew and settle for one node (``owner``) with leases of ``lease``.

    Each step is a procedure (``*_steps``: see :mod:`flowsched.mongo.commands`) run by the
    synchronous calls here (``claim``, ``renew``, ...) or by the asyncio driver."""

    def __init__(self, store: TimerStore, owner: str, lease: timedelta) -> None:
        self.store = store
        self.owner = owner
        self.lease = lease
        self.poison = Quarantiner(store, owner)
        self.letters = DeadLetters()
        self.candidates = CandidateQuery(store)
        self.history: MongoHistory | None = None
        """The node's delivery history: written with every settlement, and told of the
        lapsed claims a claim finds (see :mod:`flowsched.mongo.history`)."""

    def claim(
        self,
        routes: Iterable[str],
        now: datetime,
        limit: int,
        lookahead: timedelta = timedelta(0),
    ) -> Claimed:
        """Claim up to ``limit`` items of ``routes`` due by ``now`` (:meth:`claim_steps`)."""
        return self.store.run(self.claim_steps(routes, now, limit, lookahead))

    def claim_steps(
        self,
        routes: Iterable[str],
        now: datetime,
        limit: int,
        lookahead: timedelta = timedelta(0),
        start: int = 0,
    ) -> Steps[Claimed]:
        """Claim up to ``limit`` items of ``routes`` due by ``now`` (see :class:`Claimed`).

        The first queries also look ``lookahead`` past ``now`` (same index range, same round
        trip), so the caller learns when the next item falls due and can wake for it. The
        claim counts nothing: the caller marks the suspect claims started with
        :meth:`settle` ``starts`` before their handlers run. The claim records the start of
        the first ``start`` claims (not suspects) at ``now``: the caller calls their handlers
        at once (:mod:`flowsched.mongo.claim_start`)."""
        token = uuid.uuid4().hex
        wanted = sorted(routes)
        if not wanted:
            return Claimed(token)
        found = yield from self.candidates.steps(wanted, capped(now, lookahead), limit)
        due, next_ready, quarantined = yield from self._usable(found, now)
        ids = [doc["_id"] for doc in due]
        if not ids:
            return Claimed(token, [], len(due), next_ready, quarantined)
        lease_until = truncate_ms(capped(now, self.lease))
        # at: when it was claimed (history() shows the running attempt from it).
        at = truncate_ms(now)
        claim = {"owner": self.owner, "token": token, "lease_until": lease_until, "at": at}
        update: dict[str, Any] = {"$set": {"claim": claim, "ready_at": lease_until}}
        # route again: a document replaced meanwhile by one for another route is not ours.
        where = {"route": {"$in": wanted}, "ready_at": {"$lte": now}}
        # Read before this claim replaced it: an earlier claim nobody settled.
        suspects = frozenset(repr(doc["_id"]) for doc in due if doc.get("claim") is not None)
        starting = starting_ids(due, start)
        started = (with_start(update, at), starting) if starting else None
        taken, refused = yield from self._take(ids, where, update, due, now, started)
        quarantined += refused
        if taken == len(ids):
            # Every candidate won, each still of the generation read (a replaced document
            # has a fresh random one: see _take): the documents read are the ones claimed.
            claimed = list(due)
            self._lapsed(due, suspects, claimed)
            won = Claimed(token, claimed, len(due), next_ready, quarantined, suspects, lease_until)
            return replace(won, started=starting, at=at)
        if not taken:
            return Claimed(token, [], len(due), next_ready, quarantined)
        query = {**self.store.keys(ids), "claim.token": token}
        documents: list[Doc] = yield Find("items", query, limit=len(ids))
        # Deliver in the order the claim query found them (oldest first), not storage order.
        position = {repr(item_id): n for n, item_id in enumerate(ids)}
        documents.sort(key=lambda doc: position.get(repr(doc.get("_id")), len(ids)))
        self._lapsed(due, suspects, documents)
        won = Claimed(token, documents, len(due), next_ready, quarantined, suspects, lease_until)
        return replace(won, started=starting, at=at)

    def _lapsed(self, read: Sequence[Doc], suspects: frozenset[str], won: Sequence[Doc]) -> None:
        """Tell the history of the earlier claims (as ``read``) of the suspect documents won."""
        if self.history is None or not suspects:
            return
        mine = {repr(doc.get("_id")) for doc in won}
        for doc in read:
            if repr(doc["_id"]) in suspects and repr(doc["_id"]) in mine:
                self.history.lapsed(doc, self.lease)

    def _usable(
        self, found: Sequence[Doc], now: datetime
    ) -> Steps[tuple[list[Doc], datetime | None, int]]:
        """The claimable documents due by ``now``, the next ``ready_at`` after it, and how
        many unusable documents were moved aside.

        Every document is checked before it is claimed or counted; a due one that cannot be
        claimed is quarantined here, unclaimed (see :mod:`flowsched.mongo.quarantine`)."""
        due: list[Doc] = []
        upcoming: list[datetime] = []
        poison: list[tuple[Doc, str]] = []
        for n, doc in enumerate(found):
            if n and n % CHECK_SLICE == 0:
                yield Breather()  # nothing claimed yet: a cancellation here leaves nothing held
            problem = claim_problem(doc, self.store.buckets)
            if problem is not None:
                poison.append((doc, problem))
            elif (ready := bson_utc(doc["ready_at"])) > now:
                upcoming.append(ready)
            else:
                due.append(doc)
        removed = 0
        if poison:
            removed = yield from self.poison.unclaimed_steps(poison, CLAIM_FIELDS, now)
        return due, min(upcoming, default=None), removed

    def _take(
        self,
        ids: list[Any],
        where: dict[str, Any],
        update: dict[str, Any],
        due: Sequence[Doc],
        now: datetime,
        started: tuple[dict[str, Any], frozenset[str]] | None = None,
    ) -> Steps[tuple[int, int]]:
        """The claiming update of ``due`` (whose ids are ``ids``): ``update``, or for the ids
        in ``started[1]`` ``started[0]``, which records the start
        (:func:`~flowsched.mongo.claim_start.take_claims_steps`)."""
        start_update, starting = started if started is not None else (update, frozenset())
        updates = (update, start_update)
        return (
            yield from take_claims_steps(
                self.store, self.poison, where, updates, starting, due, now
            )
        )

    def fence_slots(self, claims: Sequence[Claim]) -> list[Claim]:
        """Take the slots of recurring claims (:meth:`fence_slots_steps`)."""
        return self.store.run(self.fence_slots_steps(claims))

    def fence_slots_steps(self, claims: Sequence[Claim]) -> Steps[list[Claim]]:
        """Take the slot of each recurring claim (``item.due``, after ``item.previous``):
        the claims whose ``applied`` this call moved, so theirs to run; the rest were lost
        (replaced, cancelled, or re-claimed after their lease ran out) and must not run.

        One bulk write; a second round trip only when some did not match."""
        if not claims:
            return []
        writes = [
            Write(
                {
                    **self.store.key(claim.item.id),
                    "generation": claim.item.generation,
                    "claim.token": claim.token,
                    "applied": optional_ms(claim.item.previous),
                },
                # The run is counted in the write that takes the slot: once, on any node.
                {"$set": {"applied": truncate_ms(claim.item.due), "runs": claim.item.runs + 1}},
            )
            for claim in claims
        ]
        if (yield from self.store.write_steps("items", writes)) == len(claims):
            return list(claims)
        tokens = sorted({claim.token for claim in claims})
        query = {**self.store.keys([c.item.id for c in claims]), "claim.token": {"$in": tokens}}
        found = yield Find("items", query, {"claim.token": 1, "applied": 1})
        held = {(doc["_id"], doc["claim"]["token"]): doc.get("applied") for doc in found}
        return [
            claim
            for claim in claims
            if _same_instant(held.get((claim.item.id, claim.token)), claim.item.due)
        ]

    def renew(self, held: Sequence[tuple[Any, str]], now: datetime) -> int:
        """Push the lease of ``held`` (id, token) pairs to ``now + lease``; how many the
        renewal found (fewer than ``held``: some were lost, see :meth:`holding`)."""
        return self.store.run(self.renew_steps(held, now))

    def renew_steps(self, held: Sequence[tuple[Any, str]], now: datetime) -> Steps[int]:
        """:meth:`renew` as a procedure."""
        if not held:
            return 0
        lease_until = truncate_ms(capped(now, self.lease))
        change = {"$set": {"claim.lease_until": lease_until, "ready_at": lease_until}}
        result = yield Call("items", "update_many", (self._held_query(held), change))
        return int(result.matched_count)

    def holding(self, held: Sequence[tuple[Any, str]]) -> set[tuple[Any, str]]:
        """Which of ``held`` (id, token) pairs this node still holds (one ``find``)."""
        return self.store.run(self.holding_steps(held))

    def holding_steps(self, held: Sequence[tuple[Any, str]]) -> Steps[set[tuple[Any, str]]]:
        """:meth:`holding` as a procedure."""
        if not held:
            return set()
        found: list[Doc] = yield Find("items", self._held_query(held), {"claim.token": 1})
        keys = {(doc["_id"], doc["claim"]["token"]) for doc in found}
        return {key for key in held if key in keys}

    def _held_query(self, held: Sequence[tuple[Any, str]]) -> dict[str, Any]:
        return {
            **self.store.keys(sorted({item_id for item_id, _ in held}, key=repr)),
            "claim.token": {"$in": sorted({token for _, token in held})},
            "claim.owner": self.owner,
        }

    def settle(
        self, settlements: Sequence[Settlement], now: datetime, starts: Sequence[Claim] = ()
    ) -> None:
        """Write every outcome and mark ``starts`` started (:meth:`settle_steps`)."""
        self.store.run(self.settle_steps(settlements, now, starts))

    def settle_steps(
        self, settlements: Sequence[Settlement], now: datetime, starts: Sequence[Claim] = ()
    ) -> Steps[None]:
        """Write every outcome, fenced, and mark ``starts`` started (``deliveries`` =
        ``attempt + 1``), in one bulk write; safe to repeat after an error (every write is
        idempotent)."""
        dead = [s for s in settlements if isinstance(s.action, DeadLettered)]
        quarantined = [s for s in settlements if isinstance(s.action, Quarantine)]
        if quarantined:
            records = [quarantine_record(s, self.owner, now) for s in quarantined]
            yield from self.store.put_quarantined_steps(records)
        writes = settlement_writes(settlements, self.store)
        writes.extend(start_mark(claim, self.store) for claim in starts)
        history = self.history
        if history is not None:  # their attempts (if they ran) were opened already
            history.settled((s.item_id, s.generation) for s in settlements)
        if history is not None:
            # The attempts that ended so far ride on this settle (flowsched.mongo.history).
            ended: list[Record] = history.take() if settlements else []
            yield from history.settle_steps(self.store, writes, ended)
        else:
            yield from self.store.write_steps("items", writes)
        for settlement in dead:  # dead letters (mongo/dead_letters.py)
            assert isinstance(settlement.action, DeadLettered)
            letter = dead_letter_document(settlement.action.dead)
            fence = bucket_fence(settlement, self.store)
            yield from self.letters.steps(self.store, letter, settlement.token, fence)
        self.letters.settled((s.item_id, s.token) for s in dead)

    def settle_each(
        self,
        settlements: Sequence[Settlement],
        now: Callable[[], datetime],
        starts: Sequence[Claim] = (),
    ) -> None:
        """Like :meth:`settle`, one outcome at a time (:meth:`settle_each_steps`)."""
        self.store.run(self.settle_each_steps(settlements, now, starts))

    def settle_each_steps(
        self,
        settlements: Sequence[Settlement],
        now: Callable[[], datetime],
        starts: Sequence[Claim] = (),
    ) -> Steps[None]:
        """Like :meth:`settle`, one outcome at a time (after one could not be encoded, or the
        server refused the batch for good: :func:`refused_for_good`), writing every outcome
        it can and dropping (and logging) only one that cannot be written on its own: its
        claim runs out and the item is delivered again. A transient error propagates (the
        caller keeps them all: settling repeats safely)."""
        yield from self.settle_steps([], now(), starts)
        for settlement in settlements:
            try:
                yield from self.settle_steps([settlement], now())
            except Exception as exc:
                if not refused_for_good(exc):
                    raise
                log.error("dropping the outcome of %r: %s", settlement.item_id, exc)
