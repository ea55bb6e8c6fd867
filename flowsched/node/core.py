"""Internal: the node core — everything a node decides, with no I/O, no threads, no asyncio.

h11-style: the driver asks :meth:`NodeCore.next_action` what to do at ``now`` (by the
node's clock), performs it (a store call, a handler start, a sleep) and feeds the result
back with :meth:`NodeCore.succeeded` / :meth:`NodeCore.failed` (store calls) and
:meth:`NodeCore.finished` (a handler ended); :func:`store_call` maps an action to the store
method a driver calls or awaits. The drivers differ only in how they wait. The rules:

* **Lanes** (:func:`lane`): claims, confirms, and the rest (settle, renew, release): one
  call of each lane may be in flight at once (the next claim goes while the last claims
  are confirmed and settled); within a lane, calls go one at a time.
* **Claims.** The node holds at most ``workers + batch_size`` claims running, confirming or queued
  (outcomes owed count when it starts on claim; queueing, none is claimed while a batch is owed);
  it claims up to ``batch_size`` at a time (none while two waves are queued, or an outcome owed
  past its lease is unsettled: its item is claimable, by this node too) when woken (a schedule, a
  new route, a slot freed) or at the next due time it was told; after a short claim it asks for the
  next due time. At least every ``poll_interval`` it polls: a next-due call (to the next poll),
  then a claim if due.
* **The check before a start.** A queued claim is not a started delivery: when workers are free,
  the queued claims for them are confirmed with the store (``confirm_start``: fence and lease still
  hold, by the store's clock; the start is recorded) and only those confirmed in their lease are
  started, with no store call in between: a cancel or replace that has returned wins over every
  claim not yet confirmed. **Start on claim** (``start_on_claim``: ``claim_started``, unless
  queueing costs fewer round trips): the claim and that check are one call; the node claims for
  free slots only, gathers a fuller batch a little, and in a stream (two claims in a row found
  some, the last short) claims again ``pace`` after the last (:data:`~flowsched.node.gather.PACE`).
* **Leases.** Queued and running claims are renewed when half their lease has gone, before any
  settle, with the claims of the outcomes still owed; a claim whose renewal is refused is dropped
  from the queue (a running one goes on: if taken, only a one-shot success settles).
* **Settles** are batched: outcomes wait while a settle, renewal or release is in flight, and while
  handlers run, claims are queued or a claim or confirm is out, for at most ``SETTLE_GATHER``
  (full, or a lease ending in it: at once); a confirm short of claims waits for a claim on its way,
  a claim asks for at least half a batch unless the node holds none. **A refused settle** keeps its
  outcomes: if the store is unavailable (:class:`~flowsched.SchedulerUnavailable`, ``OSError``) the
  whole batch is retried after the backoff, for as long as it takes (settling twice is harmless:
  the second is stale); if the store refused the content (any other error), the batch is retried
  one settlement at a time, and a single settlement refused that way is dropped with an error log
  (its lease lapses and the item is delivered again: at least once).
* **Outages** (:class:`~flowsched.node.outage.StoreOutage`): a failing store call backs off
  0.1 s doubling, capped at 5 s and ``poll_interval``; one warning per outage, one line at
  recovery. **Closing**: queued claims are released unstarted, running handlers are waited
  for (at most the driver's ``shutdown_timeout``), pending outcomes are settled.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from flowsched.errors import SchedulerUnavailable
from flowsched.node.actions import (
    CLAIM,
    CONFIRM,
    MAIN,
    Action,
    ClaimDue,
    ConfirmStart,
    FindNextDue,
    ReleaseClaims,
    RenewLeases,
    SettleBatch,
    Sleep,
    StartHandler,
    claims_of,
    lane,
    store_call,
)
from flowsched.node.gather import GATHER, SETTLE_GATHER, Gather
from flowsched.node.outage import FIRST, LONGEST, StoreOutage
from flowsched.node.settings import LAST_INSTANT, LateHook, NodeSettings
from flowsched.outcomes import NextSlot, Outcome, Redeliver
from flowsched.store.records import Claim, Settlement, SettleResult

__all__ = ["NodeCore", "NodeSettings", "lane", "store_call"]

log = logging.getLogger("flowsched.node")


class NodeCore:
    """One node's decisions (see the module). Not thread-safe: one lock or one task."""

    def __init__(
        self,
        settings: NodeSettings,
        routes: Callable[[], frozenset[str]],
        on_late: LateHook | None = None,
    ) -> None:
        self.settings = settings
        self.routes = routes
        self.on_late = on_late
        longest = min(LONGEST, settings.poll_interval)
        self.outage = StoreOutage(settings.owner, min(FIRST, longest), longest)
        self.queue: deque[Claim] = deque()  # claimed, not started
        self.starting: deque[tuple[int, Claim]] = deque()  # confirmed: start now
        self.running: dict[int, Claim] = {}  # started, by ticket
        self.lost: set[int] = set()  # running tickets whose lease could not be renewed
        self.pending: deque[Settlement] = deque()  # outcomes owed to the store
        self.settling, self.lapsed = 0, False  # outcomes in the settle on its way; one lapsed
        self.look_at: datetime | None = None  # claim at or after this (None: now)
        self.woken: bool | datetime = False  # a wake (True: now) while a claim call was out
        self.need_next_due = self.closing = False
        self.polling = self.polled = False  # look_at is a poll: next_due first; it was asked
        self.busy: set[str] = set()  # the lanes with a store call in flight
        self.confirming = 0  # claims in the ConfirmStart in flight
        self.claimed_last = 0  # claims the last ClaimDue returned
        self.claim_at = datetime.min.replace(tzinfo=UTC)  # when the last ClaimDue went
        self._tickets = self._split = 0  # split: settle one at a time for this many more
        self.claim_gather = Gather(min(GATHER, settings.poll_interval))
        self.settle_gather = Gather(min(SETTLE_GATHER, settings.poll_interval))

    # -- what to do ------------------------------------------------------------------

    def wake(self) -> None:
        """Something may be due now (a schedule, a new route, a requeue): look again."""
        self.look_at, self.polling = None, False
        self.woken = True if CLAIM in self.busy else self.woken

    def wake_at(self, when: datetime) -> None:
        """An item is due at ``when`` (a schedule, a requeue, a resume): look by then."""
        if self.look_at is not None and when < self.look_at:
            self.look_at, self.polling = when, False
        woken = self.woken
        if CLAIM in self.busy and woken is not True and (woken is False or when < woken):
            self.woken = when

    def _rewake(self) -> None:
        # A claim-lane call answered: the wakes heard while it was on its way still hold
        # (its answer may predate them: a timer would otherwise wait for the next poll).
        woken, self.woken = self.woken, False
        if woken is True:
            self.look_at, self.polling = None, False
        elif isinstance(woken, datetime):
            self.wake_at(woken)

    def close(self) -> None:
        """Stop claiming; release what never started; settle what ran."""
        self.closing = True

    @property
    def idle(self) -> bool:
        """Nothing running, starting, owed to the store or asked of it."""
        return not (self.running or self.starting or self.pending or self.busy)

    @property
    def saturated(self) -> bool:
        """A wake-up now could start no claim: one is out, or the node may take no more."""
        return CLAIM in self.busy or self._room() <= 0

    def next_action(self, now: datetime) -> Action:
        """What the driver should do at ``now`` (at most one store call per lane in flight)."""
        if self.starting:
            ticket, claim = self.starting.popleft()
            self.running[ticket] = claim
            return StartHandler(claim, ticket)
        if self.outage.waiting(now):
            return Sleep(self.outage.retry_at, self.idle)
        busy = self.busy
        renew_at = self._renew_at()
        action = None
        if MAIN not in busy:
            action = self._main_action(now, renew_at)
        if action is None and CONFIRM not in busy and (renew_at is None or renew_at > now):
            # Not while a renewal is due: a confirm goes out with at least half a lease
            # left, as when calls went one at a time (its reply may be slow).
            action = self._confirm_action()
        if action is None and CLAIM not in busy:
            action = self._claim_action(now)
        if action is not None:
            busy.add(lane(action))
            if lane(action) == CLAIM:
                self.woken = False  # what was heard before the call is in its answer
            return action
        # Wake for what could be done then (not a lane in flight, nor a claim with no room).
        wake: list[datetime] = []
        if renew_at is not None and MAIN not in busy:
            wake.append(renew_at)
        if self.settle_gather.at is not None and MAIN not in busy:
            wake.append(self.settle_gather.at)
        look_at = self.look_at
        claimable = not self.closing and CLAIM not in busy and self._room(now) > 0
        if look_at is not None and claimable and self.routes():
            wake.append(look_at)
        if self.claim_gather.at is not None and claimable:
            wake.append(self.claim_gather.at)
        return Sleep(min(wake, default=None), self.idle)

    def _batch(self) -> int:
        return min(self.settings.batch_size, self.settings.workers)

    def _room(self, now: datetime | None = None) -> int:
        """How many more claims the node may take now (the module's **Claims**)."""
        settings = self.settings
        late = now is not None and any(s.claim.lease_until <= now for s in self.pending)
        if self.lapsed or late:  # an outcome owed past its lease: its item is claimable again
            return 0
        owed = len(self.pending) + self.settling
        if settings.start_on_claim:  # claims for free slots only: each starts at once
            free = settings.workers - len(self.running)  # running+owed+claim <= workers+batch
            return max(0, min(settings.batch_size, free, free + settings.batch_size - owed))
        if len(self.queue) >= 2 * settings.workers:
            return 0  # claim as they go: a fuller batch
        held = len(self.running) + len(self.queue) + self.confirming  # + owed: < a batch more
        room = min(settings.batch_size, settings.workers + settings.batch_size - held)
        room = room if owed < settings.batch_size else 0
        return room if room >= max(1, self._batch() // 2) or (held == 0 and room > 0) else 0

    def _main_action(self, now: datetime, renew_at: datetime | None) -> Action | None:
        if self.closing and self.queue:
            released = tuple(self.queue)
            self.queue.clear()
            return ReleaseClaims(released)
        if renew_at is not None and renew_at <= now:
            # An overdue renewal goes before a settle (a retried settle would spend the leases
            # left), with the claims of the outcomes owed: they hold when their settle goes.
            return RenewLeases((*self._held(), *(s.claim for s in self.pending)))
        if self.pending and (self.closing or self._settle_now(now)):
            if self._split:
                batch: tuple[Settlement, ...] = (self.pending.popleft(),)
            else:
                batch = tuple(self.pending)
                self.pending.clear()
            self.settling, self.lapsed = len(batch), min(s.claim.lease_until for s in batch) <= now
            return SettleBatch(batch)
        return None

    def _settle_now(self, now: datetime) -> bool:  # the module's **Settles**
        ends = min(s.claim.lease_until for s in self.pending) - self.settle_gather.width
        active = self.running or self.queue or self.starting or self.busy & {CLAIM, CONFIRM}
        full = len(self.pending) >= self.settings.batch_size or ends <= now or not active
        return self.settle_gather.ready(now, full)

    def _confirm_action(self) -> Action | None:
        free = self.settings.workers - len(self.running)
        if not self.queue or free <= 0 or self.closing:
            return None
        if CLAIM in self.busy and len(self.queue) < free:
            return None  # a claim is on its way: confirm its claims with these
        confirm = tuple(self.queue.popleft() for _ in range(min(free, len(self.queue))))
        self.confirming = len(confirm)
        return ConfirmStart(confirm)

    def _claim_action(self, now: datetime) -> Action | None:
        if self.closing or not self.routes():
            return None
        limit, start = self._room(now), self.settings.start_on_claim
        due = self.look_at is None or self.look_at <= now
        if limit > 0 and due and self.polling:  # a poll: is anything due? (one call if not)
            self.polling, self.polled = False, True
            return FindNextDue()
        if (
            limit > 0
            and due
            # Starting on claim: a full batch at once, a partial one after the window.
            and (not start or self.claim_gather.ready(now, limit >= self._batch()))
        ):
            self.claim_at = now
            return ClaimDue(limit, start=start)
        if self.need_next_due:
            return FindNextDue()
        return None

    def _held(self) -> tuple[Claim, ...]:
        """The claims to keep renewing: queued, and running unless their lease was lost."""
        return (*self.queue, *(c for t, c in self.running.items() if t not in self.lost))

    def _renew_at(self) -> datetime | None:
        held = self._held()
        if not held:
            return None
        ends = min(claim.lease_until for claim in held)
        if ends > LAST_INSTANT - self.settings.lease:
            return None  # cut at the last date there is: a renewal could not extend it
        return ends - self.settings.lease / 2

    # -- results ---------------------------------------------------------------------

    def finished(
        self,
        ticket: int,
        outcome: Outcome,
        *,
        timed_out: bool = False,
        settled: SettleResult | None = None,
    ) -> None:
        """The handler of ``ticket`` ended with ``outcome``: owe it to the store - unless
        the driver ``settled`` it already (a store with no I/O, on the handler's thread)."""
        claim = self.running.pop(ticket)
        self.lost.discard(ticket)
        settlement = Settlement.of(claim, outcome, timed_out=timed_out)
        if settled is not None:
            return self._results((settlement,), [settled])
        self.pending.append(settlement)

    def abandoned(self, ticket: int) -> None:
        """The handler of ``ticket`` will not report (shutdown): its claim lapses."""
        self.running.pop(ticket, None)
        self.lost.discard(ticket)

    def succeeded(self, action: Action, result: object, now: datetime) -> None:
        """The store call for ``action`` returned ``result`` (as :func:`store_call` says)."""
        self.outage.succeeded(now)
        self.busy.discard(lane(action))
        if isinstance(action, SettleBatch):
            self.settling, self.lapsed = 0, False
        if isinstance(action, ClaimDue):
            claims = claims_of(result)
            stream = bool(claims) and self.claimed_last > 0  # this claim and the last found some
            self.claimed_last = len(claims)
            if action.start:  # started by the store as it claimed them: start them now
                self.claim_gather.clear()
                for claim in claims:
                    self._tickets += 1
                    self.starting.append((self._tickets, claim))
            else:
                self.queue.extend(claims)
            if len(claims) >= action.limit:
                self.look_at = None
            elif stream and self.settings.pace:  # claim again after the pace
                self.look_at = self.claim_at + self.settings.pace
            else:
                self.look_at = now + self.settings.poll_interval
                self.need_next_due = True
        elif isinstance(action, ConfirmStart):
            self.confirming = 0
            held = claims_of(result)
            kept = {id(claim) for claim in held}
            for claim in action.claims:
                if id(claim) not in kept:
                    log.debug("claim of %s no longer holds: not started", claim.item.key)
                    self.need_next_due = True  # replaced, say: its new form may be due
            for claim in held:  # unless the reply took longer than the lease left
                if claim.lease_until <= now:  # (another node may hold it now)
                    log.warning("confirm of %s came after its lease: not started", claim.item.key)
                    continue
                self._tickets += 1
                self.starting.append((self._tickets, claim))
        elif isinstance(action, SettleBatch):
            self._settled(action, result)
        elif isinstance(action, RenewLeases):
            self._renewed(action.claims, claims_of(result))
        elif isinstance(action, FindNextDue):
            self.need_next_due, polled, self.polled = False, self.polled, False
            when = result if isinstance(result, datetime) else None
            poll = now + self.settings.poll_interval
            self.polling = when is None or when > poll  # nothing known before the poll
            if when is None:
                self.look_at = poll
            elif when > now:
                self.look_at = min(when, poll)
            else:
                # Due: claim now, unless the last claim (not a poll) found nothing: no spin.
                self.look_at = None if self.claimed_last or polled else poll
        if lane(action) == CLAIM:
            self._rewake()

    def _settled(self, action: SettleBatch, result: object) -> None:
        self._split = max(0, self._split - 1)
        self._results(action.settlements, result if isinstance(result, list) else [])

    def _results(self, settlements: Sequence[Settlement], results: list[Any]) -> None:
        for settlement, outcome in zip(settlements, results, strict=False):
            if not isinstance(outcome, SettleResult):
                continue
            if not outcome.applied:
                log.debug("outcome of stale claim %s ignored", settlement.claim.item.key)
                continue
            if outcome.late is not None and self.on_late is not None:
                self.on_late(settlement.claim, outcome.late)
            moved = settlement.outcome
            if isinstance(moved, Redeliver | NextSlot):
                self.need_next_due = True
                if self.look_at is not None and moved.due < self.look_at:
                    self.look_at = moved.due

    def _renewed(self, asked: Sequence[Claim], renewed: list[Claim]) -> None:
        fresh = {(c.item.id, c.generation, c.owner, c.token): c for c in renewed}

        def current(claim: Claim) -> Claim | None:
            return fresh.get((claim.item.id, claim.generation, claim.owner, claim.token))

        asked_ids = {id(claim) for claim in asked}
        queue: deque[Claim] = deque()
        for claim in self.queue:
            if id(claim) not in asked_ids:
                queue.append(claim)
            elif (new := current(claim)) is not None:
                queue.append(new)
            else:
                log.debug("lease of queued %s lost: not started", claim.item.key)
        self.queue = queue
        for ticket, claim in list(self.running.items()):
            if id(claim) in asked_ids:
                new = current(claim)
                if new is None:
                    log.warning(
                        "node %s lost the lease of %s while its handler runs (another node "
                        "may run it too; of this run's outcomes only a one-shot success applies)",
                        self.settings.owner,
                        claim.item.key,
                    )
                    self.lost.add(ticket)  # its settle stays fenced; stop renewing it
                else:
                    self.running[ticket] = new
        # Handlers that ended while the renewal was on its way: their outcomes must carry
        # the lease the store now holds, or their settle would be stale.
        self.pending = deque(
            replace(s, claim=new)
            if id(s.claim) in asked_ids and (new := current(s.claim)) is not None
            else s
            for s in self.pending
        )

    def failed(self, action: Action, error: BaseException, now: datetime) -> None:
        """The store call for ``action`` raised ``error``: keep what must be kept, back off."""
        self.busy.discard(lane(action))
        if isinstance(action, ConfirmStart):
            self.confirming = 0
        if isinstance(action, SettleBatch):
            self.settling, self.lapsed = 0, False
        refused = not isinstance(error, SchedulerUnavailable | OSError)
        if isinstance(action, SettleBatch) and refused:
            # The store answered and refused the content: settle one at a time; a single
            # settlement refused is dropped (its lease lapses: delivered again).
            if len(action.settlements) > 1:
                self.pending.extendleft(reversed(action.settlements))
                self._split = len(action.settlements)
                return
            self._split = max(0, self._split - 1)
            log.error(
                "node %s: the store refused the outcome of %s (%s: %s); dropped, the item "
                "is delivered again when its lease ends",
                self.settings.owner,
                action.settlements[0].claim.item.key,
                type(error).__name__,
                error,
            )
            return
        self.outage.failed(type(action).__name__, error, now)
        if isinstance(action, SettleBatch):
            self.pending.extendleft(reversed(action.settlements))
        elif isinstance(action, ConfirmStart):
            self.queue.extendleft(reversed(action.claims))
        elif isinstance(action, FindNextDue):
            self.need_next_due = True
        if lane(action) == CLAIM:
            self._rewake()
