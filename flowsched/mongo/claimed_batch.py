"""Internal: turns a batch of claimed MongoDB documents into deliveries and settlements.

Shared by the background sweeper and the synchronous ``run_due``. A claimed document is
either delivered, moved to quarantine (malformed), or - when an earlier claim of it was lost
after marking its delivery started (its node died mid-delivery) - settled as a failed
delivery through the shared delivery core (backoff, or dead letter at ``max_attempts``)
without calling the handler now. A delivered claim that found an earlier lost claim is
suspect (:attr:`Claim.suspect`): its start is marked before its handler runs.

A recurring item is ticked instead (:meth:`DeliveryCore.tick`): delivered as the latest due
slot once :meth:`Claims.fence_slots` has taken that slot for this claim, or moved on to its
next slot when none is due. A lost earlier tick needs no special case (and no start mark: a
tick's failures are not counted towards a dead letter): if its node took the slot,
``applied`` says so and that slot is not run again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pymongo.errors import PyMongoError

from flowsched.clock import Clock
from flowsched.delivery import Completed, DeliveryCore, Exhausted, NextSlot
from flowsched.mongo.claims import Claimed, Claims
from flowsched.mongo.commands import Breather, Steps
from flowsched.mongo.documents import MalformedDocument, StoredItem, short_repr, stored_item
from flowsched.mongo.leases import HeldLeases
from flowsched.mongo.local_writes import LocalWrites
from flowsched.mongo.quarantine import Audit
from flowsched.mongo.server_clock import ServerClock, due_now, lease_now
from flowsched.mongo.settlement import Claim, Quarantine, Release, Settlement
from flowsched.mongo.start_check import StartChecks
from flowsched.mongo.store import Doc
from flowsched.mongo.transient import is_transient

__all__ = ["ClaimedBatch", "BatchClaimer", "deliver_in_thread"]

log = logging.getLogger("flowsched.mongo")

SORT_SLICE = 25
"""Documents a claim sorts between two pauses (see :meth:`BatchClaimer.take_steps`): on the
asyncio node, sorting a whole batch of 200 in one callback held the loop for 5-17 ms."""

LOST = "delivery lost: its node stopped renewing the lease (crashed or cut off) before it finished"


@dataclass(slots=True)
class ClaimedBatch:
    """The result of one claim: how many documents were won, and what to do with them."""

    won: int = 0
    due: int = 0
    quarantined: int = 0
    deliver: list[Claim] = field(default_factory=list)
    settle: list[Settlement] = field(default_factory=list)
    next_ready: datetime | None = None
    lease_until: datetime | None = None
    """When the leases of the claims won end (database time)."""


class BatchClaimer:
    """Claims due items of the routes served here and sorts them into a :class:`ClaimedBatch`."""

    def __init__(self, claims: Claims, core: DeliveryCore, clock: Clock) -> None:
        self.claims = claims
        self.core = core
        self.clock = clock
        self.audit = Audit(claims.poison)

    def _audit(self) -> Steps[None]:
        """Look for documents the claim query cannot find, at the first claim and then every
        few minutes (see :class:`~flowsched.mongo.quarantine.Audit`); an audit that fails is
        logged and tried again at its next time, never holding up the claim."""
        monotonic = self.clock.monotonic()
        if not self.audit.due(monotonic):
            return
        try:
            yield from self.audit.run_steps(self.clock.now(), monotonic)
        except PyMongoError as exc:
            if is_transient(exc):
                raise
            log.warning(
                "audit of %s for unusable documents failed: %s", self.claims.store.name, exc
            )

    def take(
        self,
        limit: int,
        lookahead: timedelta = timedelta(0),
        *,
        mark: bool = False,
        start: int = 0,
    ) -> ClaimedBatch:
        """Claim up to ``limit`` due items, synchronously (:meth:`take_steps`)."""
        return self.claims.store.run(self.take_steps(limit, lookahead, mark=mark, start=start))

    def take_steps(
        self,
        limit: int,
        lookahead: timedelta = timedelta(0),
        *,
        mark: bool = False,
        give_back: Callable[[list[Settlement]], None] | None = None,
        start: int = 0,
    ) -> Steps[ClaimedBatch]:
        """Claim up to ``limit`` due items (one ``find`` per route served, then one round
        trip, two if some candidates were lost; none if nothing is subscribed or registered).

        ``batch.due`` counts the due items found (won or lost to another node): when it
        reaches ``limit``, more may be due. Suspect claims (:attr:`Claim.suspect`) must be
        marked started before their handlers run: ``mark``, here and now, in one more round
        trip when there are any (the caller runs them all at once: ``run_due``); otherwise
        the caller marks each one (:meth:`Claims.settle` ``starts``).

        The documents won are sorted :data:`SORT_SLICE` at a time with a :class:`Breather`
        between slices. Interrupted at a pause (the asyncio node shut down), the sort is
        finished without pausing and ``give_back`` gets the settlements to write: every claim
        won released unrun, and what the sort settled (quarantines, lost deliveries).

        ``start``: how many of the claims the caller will start at once (free handler slots;
        the whole batch for ``run_due``): the claim records their start
        (:mod:`flowsched.mongo.claim_start`, :attr:`Claim.started`), no check is made before
        their handlers, and they come first in ``batch.deliver``."""
        batch = ClaimedBatch()
        routes = self.core.routes()
        if not routes or limit < 1:
            return batch
        yield from self._audit()
        if isinstance(self.clock, ServerClock):
            # The claim judges due times and leases by it (a measurement every REFRESH s,
            # on the synchronous driver: the asyncio face judges by its own clock, for now).
            self.clock.refresh_when_due()
        now = due_now(self.clock)  # never ahead of the database: never early
        claimed = yield from self.claims.claim_steps(routes, now, limit, lookahead, start)
        documents = claimed.documents
        batch.won, batch.due, batch.next_ready = (
            len(documents),
            claimed.due,
            claimed.next_ready,
        )
        batch.quarantined = claimed.quarantined
        batch.lease_until = claimed.lease_until
        ticks: list[tuple[Claim, Claim]] = []  # (as claimed, the slot to run)
        for n, document in enumerate(documents):
            if n and n % SORT_SLICE == 0:
                try:
                    yield Breather()
                except BaseException:
                    for rest in documents[n:]:
                        self._sort(rest, claimed, batch, ticks)
                    if give_back is not None:
                        give_back(_given_back(batch, ticks))
                    raise
            self._sort(document, claimed, batch, ticks)
        if ticks:
            # Taking the slot is conditional on the claim too: a check right before the tick.
            fenced = yield from self.claims.fence_slots_steps([tick for _, tick in ticks])
            batch.deliver.extend(fenced)
        if claimed.started:
            # The claims started at once go first, to the free slots (a stable sort).
            batch.deliver.sort(key=lambda claim: claim.started is None)
            if self.claims.history is not None:  # their attempts start at the recorded start
                starts_recorded = [
                    (c.item.id, c.item.generation, c.started)
                    for c in batch.deliver
                    if c.started is not None
                ]
                self.claims.history.recorded(starts_recorded)
        starts = [claim for claim in batch.deliver if claim.suspect]
        if mark and starts:
            yield from self.claims.settle_steps([], self.clock.now(), starts)
        return batch

    def _sort(
        self,
        document: Doc,
        claimed: Claimed,
        batch: ClaimedBatch,
        ticks: list[tuple[Claim, Claim]],
    ) -> None:
        """One document won: to deliver, to quarantine, a lost delivery to settle, or a tick."""
        token = claimed.token
        try:
            stored = stored_item(document)
        except MalformedDocument as exc:
            where = short_repr(exc.item_id)
            log.error("quarantining %s %s: %s", self.claims.store.name, where, exc.reason)
            action = Quarantine(document, exc.reason)
            batch.settle.append(Settlement(document.get("_id"), None, token, action))
            return
        suspect = repr(stored.item.id) in claimed.suspects
        started = claimed.at if repr(stored.item.id) in claimed.started else None
        if stored.item.recurrence is not None:
            self._tick(stored, document, suspect, token, batch, ticks, started)
            return
        claim = Claim(stored.item, stored.attempts, token, suspect, started)
        lost = stored.lost()
        if lost:
            failures = stored.attempts + lost
            outcome = self.core.failure(stored.item, failures - 1, LOST)
            batch.settle.append(Settlement.of(claim, outcome))
        else:
            batch.deliver.append(claim)

    def _tick(
        self,
        stored: StoredItem,
        document: Doc,
        suspect: bool,
        token: str,
        batch: ClaimedBatch,
        ticks: list[tuple[Claim, Claim]],
        started: datetime | None = None,
    ) -> None:
        if suspect:
            log.warning(
                "an earlier tick of %s was lost (its node stopped renewing the lease); a slot "
                "it took counts as applied",
                stored.item.id,
                extra={"item_id": stored.item.id, "kind": stored.item.kind.value},
            )
        ticked = self.core.tick(stored.item)
        if isinstance(ticked, Exhausted):  # no slot left: quarantined, with the document read
            action = Quarantine(document, f"recurrence: {ticked.dead.error}")
            batch.settle.append(Settlement(document.get("_id"), None, token, action))
        elif isinstance(ticked, NextSlot | Completed):  # nothing due yet, or ended: removed
            claim = Claim(stored.item, stored.attempts, token)
            batch.settle.append(Settlement.of(claim, ticked))
        else:
            as_claimed = Claim(stored.item, stored.attempts, token, suspect)
            ticks.append((as_claimed, Claim(ticked, stored.attempts, token, started=started)))


def _given_back(batch: ClaimedBatch, ticks: list[tuple[Claim, Claim]]) -> list[Settlement]:
    """What an interrupted sort writes: its settlements, and every claim it would have
    delivered (ticks as claimed: their slots were not taken yet) released unrun."""
    unrun = batch.deliver + [as_claimed for as_claimed, _ in ticks]
    releases = [Settlement.of(c, Release(c.item.due, c.attempt)) for c in unrun]
    return batch.settle + releases


def deliver_in_thread(
    batch: ClaimedBatch,
    stamp: int,
    fence: LocalWrites,
    core: DeliveryCore,
    write: Callable[[list[Settlement]], None],
    claims: Claims,
) -> int:
    """Deliver a claimed batch in this thread (``run_due``) and ``write`` the outcomes;
    how many ran.

    A claim this node cancelled or replaced since its stamp is released, not run, and so is
    one whose lease has ended (or nearly) by the time its turn comes: nobody renews a
    ``run_due`` batch's leases (see :mod:`flowsched.mongo.leases`), and one that another
    node cancelled, replaced or took over (checked right before its handler: see
    :mod:`flowsched.mongo.start_check`; a failed check raises). A run that completes
    after its lease ended is settled as a late completion. If a
    handler raises (``KeyboardInterrupt``), the finished outcomes are written and the
    interrupted and unstarted claims given back (claimable again at once, not counted as
    failures, like the in-memory adapter's), then the interrupt goes on."""
    settle = batch.settle
    done = ran = 0
    leases = HeldLeases(claims.lease)
    if batch.lease_until is not None:
        leases.claimed_claims(batch.deliver, batch.lease_until)
    checks = StartChecks(claims, leases)  # fresh for START_FRESH of real time
    checks.queued(batch.deliver)
    try:
        for claim in batch.deliver:
            checks.taken(claim)
            holds = checks.verdict(claim)
            if holds is None and not fence.stale(stamp, claim.item):
                claims.store.run(checks.check_steps(checks.batch(claim)))
                holds = checks.found(claim)
            if (
                fence.stale(stamp, claim.item)
                or not holds
                or leases.lapsed(claim, lease_now(core.clock))
            ):
                settle.append(Settlement.of(claim, Release(claim.item.due, claim.attempt)))
            else:
                outcome = Settlement.of(claim, core.deliver(claim.item, claim.attempt))
                settle.append(leases.finished(outcome, claim, core.clock.now(), core.observer))
                ran += 1
            done += 1
    except BaseException:
        rest = batch.deliver[done:]
        settle.extend(
            Settlement.of(claim, Release(claim.item.due, claim.attempt)) for claim in rest
        )
        try:
            write(settle)
        except Exception as exc:
            # Nothing is lost: the claims run out with their lease and are redelivered.
            log.warning("run_due interrupted; could not write its outcomes: %s", exc)
        raise
    write(settle)
    return ran
