"""Internal: the check before a handler starts - does this node's claim still hold?

A claim waiting in a node's queue is not a started delivery (CONTRACT section 15). A claim
whose handler starts at once - for an idle worker or a free slot on a running node - needs
no check: the claim itself recorded the start
(:mod:`flowsched.mongo.claim_start`, :attr:`~flowsched.mongo.settlement.Claim.started`;
:meth:`StartChecks.verdict` lets it start). The rest of this module is about the claims
that wait. Between
a claim and its handler's call, another node may cancel the item, replace it, or - the lease
over - take it over; ``cancel()`` then returns ``True`` and the old form must never start.
So right before a handler is called, the node makes sure its claim still holds in the
database: the document there, of the generation claimed, under this claim's token
(:meth:`StartChecks.check_steps`, one ``find`` by ids).

**The rule.** The check is sent when a worker (a slot) has taken the claim, and covers every
claim not started yet (waiting in the queue, or taken by a worker that has not asked yet:
one ``find`` for a wave of idle workers, not one each). A claim found holding may start
without another check for :data:`START_FRESH` seconds after the check answered; one that
waited longer (busy workers, a claim queued behind a long handler) is checked again when its
turn comes. A delivery's start is thus at most :data:`START_FRESH` (plus the answer's way
back) after a check that found its claim holding, by the database's order: a cancel or
replace that returned before the check was sent always wins; one applied after it meets a
delivery the node had already committed to start (``history`` lists it once its outcome is
written, ended after the cancel).

**Why no check orders the call itself.** The handler is called on the node after an answer
came back; a cancel applied just after the check can return to its caller before that call.
The audit of issue 37 (3 threaded nodes in one process, idle workers, replaces and cancels
10-30 ms apart, wire server: ``bench/results/mongo_start_check.md``) counts such starts:
989defa (no check) 7 of 358 (2 %); this rule 31 of 3,665 (0.8 %, c0a96e4) and 9 of 1,335
(with the wave's cover above); 2 of 331 with a check right before every start
(``START_FRESH`` = 0): the check narrows the window, nothing closes it.

**Cheaper designs tried, and why not.**

* *The claim as the check, unrecorded* (its ``update_many`` is conditional on the
  generation read and makes the document this claim's, so it confirms the same facts): no
  round trip when the handlers start at once. But the claim answers before the batch is
  sorted and handed to the workers: the audit counted 33 of 1,379 starts (2.4 %) that came
  after a replace had returned, as many as with no check at all. That audit measured a
  start by the time its *handler was called*. Section 15 defines a start as the moment the
  node *records* it in the database, by the database's clock: a claim that records the start
  (``claim.started``, now done for the claims that start at once) is ordered by the database
  before every cancel or replace that returns after it, so none of those starts comes
  after the cancel; the cancel finds a delivery that had already started, which ``history``
  shows (open, or ended after the cancel, ``started`` before it) - the documented way to
  learn of it. A claim that waits in the queue is not started, so it records nothing and
  keeps the check.
* *A conditional write as the check* (a start mark per wave, ``update_many`` fenced on id,
  generation and token; a ``find`` only when fewer matched): the database orders it where it
  orders the ``find``, and its answer travels back the same way, so it keeps the same
  promise - at the price of a write (journal, change-stream filtering) for a read. Without a
  freshness window it costs one round trip per wave: a threaded node of 8 workers starts a
  batch of 100 in 13 waves (0.13 round trips per fired timer; measured 0.133 when waves
  outlast :data:`START_FRESH`, against 0.043 with a 30 s window).

Cost: none for the claims started on the claim; for the claims that waited, one ``find``
per batch whose handlers start within :data:`START_FRESH`, one per wave of starts otherwise.

A claim found not holding is given back unrun (its fenced release matches nothing), and its
lease is marked lost (:meth:`~flowsched.mongo.leases.HeldLeases.lost`: a replaced or
cancelled item's run is no late completion). A check that fails (an outage) starts nothing:
the claims it was for are given back, uncounted.

:class:`StartChecks` holds the rule; :class:`ThreadStartChecks` (``MongoScheduler``'s worker
threads) and :class:`AsyncStartChecks` (``AsyncMongoScheduler``'s delivery tasks) differ only
in how a claim waits for a check another one sent.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pymongo

from flowsched.mongo.claims import Claims
from flowsched.mongo.commands import Find, Steps, drive_async
from flowsched.mongo.leases import HeldLeases
from flowsched.mongo.settlement import Claim
from flowsched.mongo.store import Doc

__all__ = ["START_FRESH", "AsyncStartChecks", "StartChecks", "ThreadStartChecks"]

Key = tuple[Any, str]

START_FRESH = 0.05
"""Seconds after a check answered during which a claim it found holding may start without
another check (a batch's handlers start within it when workers are idle)."""


def _key(claim: Claim) -> Key:
    return (claim.item.id, claim.token)


class StartChecks:
    """When each claim was last found holding, and the check itself (no waiting here).

    ``monotonic``: a real monotonic clock (seconds): the races a check closes are real calls
    on other nodes, whatever clock the node runs on. The claims :meth:`queued` and not yet
    :meth:`taken` are checked together with the one asking."""

    def __init__(
        self, claims: Claims, leases: HeldLeases, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.claims = claims
        self.leases = leases
        self.monotonic = monotonic
        self._waiting: dict[Key, Claim] = {}
        self._in_hand: dict[Key, Claim] = {}  # taken from the queue, not started yet
        self.checks = 0
        """Checks sent (each one ``find``)."""
        self._checked: dict[Key, float] = {}  # when the check that found it holding answered
        self._refused: set[Key] = set()  # found not holding: never to start
        self._found: dict[Key, bool] = {}  # the last check's verdict, for the claims it covered
        self._inflight: set[Key] | None = None  # claims the check in flight is for

    def queued(self, claims: Iterable[Claim]) -> None:
        """``claims`` wait in this node's queue for a handler (a worker, a slot)."""
        self._waiting.update((_key(claim), claim) for claim in claims)

    def taken(self, claim: Claim) -> None:
        """``claim`` left the queue: about to ask :meth:`verdict` (a check sent meanwhile
        covers it, see :meth:`batch`) until :meth:`forget`."""
        key = _key(claim)
        if self._waiting.pop(key, None) is not None:
            self._in_hand[key] = claim

    def in_hand(self) -> int:
        """How many claims were taken from the queue and neither started nor given back."""
        return len(self._in_hand)

    def waiting(self) -> list[Claim]:
        """The claims not started yet: waiting in the queue or taken from it."""
        return [*self._waiting.values(), *self._in_hand.values()]

    def verdict(self, claim: Claim) -> bool | None:
        """``True``: may start now; ``False``: must not start; ``None``: needs a check."""
        if claim.started is not None:
            return True  # the claim recorded its start: it was the check (claim_start)
        key = _key(claim)
        if key in self._refused:
            return False
        checked = self._checked.get(key)
        if checked is not None and self.monotonic() - checked <= START_FRESH:
            return True
        return None

    def batch(self, claim: Claim) -> list[Claim]:
        """The claims a check sent for ``claim`` covers: it, and every other claim not
        started yet (waiting, or taken by another worker that has not asked yet) and not
        found holding lately."""
        chosen = {_key(claim): claim}
        for other in self.waiting():
            if _key(other) not in chosen and self.verdict(other) is None:
                chosen[_key(other)] = other
        return list(chosen.values())

    def check_steps(self, batch: Sequence[Claim]) -> Steps[None]:
        """One ``find``: which of ``batch`` still hold (document there, generation claimed,
        this claim's token); records the verdicts."""
        self.checks += 1
        ids = sorted({claim.item.id for claim in batch}, key=repr)
        projection = {"claim.token": 1, "generation": 1}
        found: list[Doc] = yield Find("items", self.claims.store.keys(ids), projection)
        stored = {repr(doc.get("_id")): doc for doc in found}
        received = self.monotonic()
        lost: list[Key] = []
        gone: list[Key] = []
        for claim in batch:
            key = _key(claim)
            doc = stored.get(repr(claim.item.id))
            if doc is None or doc.get("generation") != claim.item.generation:
                gone.append(key)
                self._refused.add(key)
            elif _token(doc) != claim.token:
                lost.append(key)
                self._refused.add(key)
            else:
                self._checked[key] = received
            self._found[key] = key not in self._refused
        if lost or gone:
            self.leases.lost(lost + gone, gone)

    def forget(self, claim: Claim) -> None:
        """``claim`` started or was given back: nothing more to remember of it."""
        key = _key(claim)
        self._waiting.pop(key, None)
        self._in_hand.pop(key, None)
        self._checked.pop(key, None)
        self._refused.discard(key)
        self._found.pop(key, None)

    def found(self, claim: Claim) -> bool:
        """The verdict of the check that just covered ``claim`` (``False``: none came)."""
        return self._found.pop(_key(claim), False)


def _token(doc: Doc) -> object:
    claim = doc.get("claim")
    return claim.get("token") if isinstance(claim, Mapping) else None


class ThreadStartChecks(StartChecks):
    """The check for worker threads: one check in flight at a time; a worker whose claim a
    check in flight covers waits for it instead of sending its own."""

    def __init__(self, claims: Claims, leases: HeldLeases, op_timeout: float) -> None:
        """``op_timeout``: seconds a check may take (it fails then: give the claim back)."""
        super().__init__(claims, leases)
        self._op_timeout = op_timeout
        self._lock = threading.Condition()
        self._sent = 0  # checks completed (or failed)

    def may_start(self, claim: Claim) -> bool:
        """Whether ``claim``'s handler may start now (checking, or waiting for a check, as
        needed); ``False`` also when the check failed (an outage): give it back."""
        key = _key(claim)
        with self._lock:
            while True:
                verdict = self.verdict(claim)
                if verdict is not None:
                    return verdict
                if self._inflight is None:
                    batch = self.batch(claim)
                    self._inflight = {_key(c) for c in batch}
                    break
                covered = key in self._inflight
                self._lock.wait_for(self._answered(self._sent))
                if covered:  # that check's verdict (none if it failed: give it back)
                    return self.found(claim)
        try:
            with pymongo.timeout(self._op_timeout):
                self.claims.store.run(self.check_steps(batch))
        except Exception:
            return False
        finally:
            with self._lock:
                self._inflight = None
                self._sent += 1
                self._lock.notify_all()
        with self._lock:
            return self.found(claim)

    def queued(self, claims: Iterable[Claim]) -> None:
        with self._lock:
            super().queued(claims)

    def forget(self, claim: Claim) -> None:
        with self._lock:
            super().forget(claim)

    def taken(self, claim: Claim) -> None:
        with self._lock:
            super().taken(claim)

    def _answered(self, sent: int) -> Callable[[], bool]:
        """Whether the check in flight when ``sent`` checks had completed is over."""
        return lambda: self._sent != sent or self._inflight is None


class AsyncStartChecks(StartChecks):
    """The check for delivery tasks on one event loop: a task whose claim a check in flight
    covers awaits it instead of sending its own."""

    def __init__(self, claims: Claims, leases: HeldLeases, bounded: Callable[[], Any]) -> None:
        """``bounded()``: the context that bounds a check (``op_timeout``)."""
        super().__init__(claims, leases)
        self._bounded = bounded
        self._done: asyncio.Event | None = None

    async def may_start(self, claim: Claim) -> bool:
        """Whether ``claim``'s handler may start now (see :meth:`ThreadStartChecks.may_start`)."""
        key = _key(claim)
        while True:
            verdict = self.verdict(claim)
            if verdict is not None:
                return verdict
            if self._inflight is None:
                break
            done = self._done
            assert done is not None
            covered = key in self._inflight
            await done.wait()
            if covered:  # that check's verdict (none if it failed: give it back)
                return self.found(claim)
        batch = self.batch(claim)
        self._inflight = {_key(c) for c in batch}
        self._done = done = asyncio.Event()
        try:
            with self._bounded():
                await drive_async(self.check_steps(batch), self.claims.store)
        except Exception:
            return False
        finally:
            self._inflight = None
            done.set()
        return self.found(claim)
