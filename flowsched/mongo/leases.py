"""Internal: the leases this node holds, tracked locally - is a claim still ours to run?

A claim is this node's only for its lease. A node can be stopped (SIGSTOP, a VM paused, a
long garbage collection, a handler that holds the GIL) past the end of a lease while other
nodes take the item over, so before a handler starts the node checks, by the database's
clock (:class:`~flowsched.mongo.server_clock.ServerClock`), that the claim's lease is alive
with :func:`start_margin` to spare. :class:`HeldLeases` knows each held claim's
``lease_until``: set at the claim, moved only by a renewal the server acknowledged for that
claim, never by a renewal that did not reach it. A claim whose lease has ended is given
back (a fenced release: if another node took it, the release matches nothing), never run.

A run that *completes* after its lease ended is no failure (:func:`late_completion`): it is
logged and counted (:meth:`~flowsched.delivery.Observer.late_completion`), and a one-shot
item's completion is written fenced on ``_id`` + ``generation`` instead of the claim token
(:attr:`~flowsched.mongo.settlement.Settlement.late`). The node that took the item over
marked its start (a suspect claim), which would later count as a failed attempt; the late
completion settles that generation, so the item ends completed and never moves towards the
dead letter because of runs that succeeded. A recurring item needs no such case: its slot is
fenced by ``applied`` and a tick's failures never lead to a dead letter.

Both faces keep these rules with this code: ``MongoScheduler``'s sweeper and ``run_due``,
``AsyncMongoScheduler``'s firing task and ``run_due`` (renewals by :func:`renew_held_steps`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from flowsched.clock import LAST, capped
from flowsched.delivery import Completed, Observer
from flowsched.mongo.claims import Claims
from flowsched.mongo.commands import Find, Steps
from flowsched.mongo.documents import truncate_ms
from flowsched.mongo.settlement import Claim, Settlement
from flowsched.mongo.store import Doc

__all__ = [
    "HeldLeases",
    "late_completion",
    "refused_start",
    "renew_held",
    "renew_held_steps",
    "start_margin",
]

log = logging.getLogger("flowsched.mongo")

Key = tuple[Any, str]  # (item id, claim token)

MAX_MARGIN = timedelta(seconds=2)


def start_margin(lease: timedelta) -> timedelta:
    """How much of its lease a claim must have left for its handler to start: a fifth of
    the lease, at most :data:`MAX_MARGIN` (the offset's error, a short stall after the check).
    A healthy node renews every third of the lease, so its claims keep two thirds."""
    return min(lease / 5, MAX_MARGIN)


class HeldLeases:
    """``lease_until`` (database time) of each claim this node holds, by (id, token)."""

    def __init__(self, lease: timedelta) -> None:
        self.lease = lease
        self.margin = start_margin(lease)
        self._until: dict[Key, datetime] = {}
        # Claims found lost: True if their item was replaced or cancelled (gone), False if
        # another node took it over after the lease ended.
        self._lost: dict[Key, bool] = {}
        self._generation: dict[Key, int | None] = {}
        self._lock = threading.Lock()

    def claimed(self, keys: Iterable[Key], lease_until: datetime) -> None:
        """Claims just won, their lease ending at ``lease_until``."""
        with self._lock:
            for key in keys:
                self._until[key] = lease_until

    def claimed_claims(self, claims: Iterable[Claim], lease_until: datetime) -> None:
        """Claims just won (with their generations), their lease ending at ``lease_until``."""
        with self._lock:
            for claim in claims:
                key = (claim.item.id, claim.token)
                self._until[key] = lease_until
                self._generation[key] = claim.item.generation

    def generation(self, key: Key) -> int | None:
        """The generation ``key`` was claimed at (``None``: not known)."""
        with self._lock:
            return self._generation.get(key)

    def renewed(self, keys: Iterable[Key], lease_until: datetime) -> None:
        """Claims whose renewal to ``lease_until`` the server acknowledged."""
        with self._lock:
            for key in keys:
                if key in self._until:
                    self._until[key] = max(self._until[key], lease_until)

    def lost(self, keys: Iterable[Key], gone: Iterable[Key] = ()) -> None:
        """Claims a renewal (or a start check) did not find: taken over after the lease, or
        (``gone``) their item replaced or cancelled. Their last known lease end is kept: a
        run that completes anyway is late by the time since then, not since year 1."""
        gone = set(gone)
        with self._lock:
            for key in keys:
                if key in self._until:
                    self._lost[key] = self._lost.get(key, False) or key in gone

    def forget(self, keys: Iterable[Key]) -> None:
        """Claims settled: no longer held."""
        with self._lock:
            for key in keys:
                self._until.pop(key, None)
                self._lost.pop(key, None)
                self._generation.pop(key, None)

    def gone(self, key: Key) -> bool:
        """Whether ``key``'s item was found replaced or cancelled since the claim."""
        with self._lock:
            return self._lost.get(key, False)

    def until(self, key: Key) -> datetime | None:
        """When the lease of ``key`` ends (``None``: not held)."""
        with self._lock:
            return self._until.get(key)

    def may_start(self, key: Key, now: datetime) -> bool:
        """Whether a handler of ``key`` may start at ``now``: its lease is alive, with the
        margin to spare. A claim not tracked here (none should be) may start, and so may one
        whose lease ends at the last date (:data:`~flowsched.clock.LAST`, cut short by the end
        of the year 9999: no clock passes it, so it cannot lapse)."""
        with self._lock:
            if key in self._lost:
                return False
            until = self._until.get(key)
        return until is None or until >= LAST or until - now > self.margin

    def lapsed(self, claim: Claim, now: datetime) -> bool:
        """Whether ``claim`` must not start at ``now`` (:meth:`may_start`); said in the log."""
        key = (claim.item.id, claim.token)
        if self.may_start(key, now):
            return False
        refused_start(claim, self.until(key), now)
        return True

    def finished(
        self, settlement: Settlement, claim: Claim, now: datetime, observer: Observer
    ) -> Settlement:
        """The settlement of ``claim``'s run, finished at ``now``: a
        :func:`late_completion` if its lease had ended by then (or the claim was found
        taken over). A run whose item was replaced or cancelled meanwhile is no late
        completion: its fenced settlement matches nothing and the observer hears nothing."""
        key = (claim.item.id, claim.token)
        if self.gone(key) or not self.ended(key, now):
            return settlement
        return late_completion(settlement, claim, self.until(key), now, observer)

    def ended(self, key: Key, now: datetime) -> bool:
        """Whether the lease of ``key`` had ended by ``now`` (or was found taken over)."""
        with self._lock:
            until = self._until.get(key)
            lost = key in self._lost
        return until is not None and (lost or now >= until)


def refused_start(claim: Claim, until: datetime | None, now: datetime) -> None:
    """Log a claim given back because its lease had ended (or nearly) before it started."""
    ended = "" if until is None else f" (lease until {until.isoformat()}, now {now.isoformat()})"
    log.warning(
        "claim of %r lapsed before its handler started%s: given back unrun",
        claim.item.id,
        ended,
        extra={"item_id": claim.item.id, "kind": claim.item.kind.value},
    )


def late_completion(
    settlement: Settlement, claim: Claim, until: datetime | None, now: datetime, observer: Observer
) -> Settlement:
    """``settlement`` of a run that completed at ``now`` after its lease ended at ``until``:
    logged, reported to ``observer``, and for a one-shot item written fenced on id and
    generation (see the module's docstring). Any other outcome is returned as it is."""
    if not isinstance(settlement.action, Completed) or settlement.generation is None:
        return settlement
    late = max(now - until, timedelta(0)) if until is not None else timedelta(0)
    log.warning(
        "%r completed %.1fs after its lease ended (another node may have run it too): "
        "settled as completed, not as a failure",
        claim.item.id,
        late.total_seconds(),
        extra={"item_id": claim.item.id, "kind": claim.item.kind.value},
    )
    try:
        observer.late_completion(claim.item, claim.attempt, late)
    except Exception:
        log.exception("observer late_completion failed (ignored)")
    if claim.item.recurrence is not None:
        return settlement
    return settlement.settled_late()


def renew_held(claims: Claims, leases: HeldLeases, held: list[Key], now: datetime) -> None:
    """:func:`renew_held_steps`, synchronously."""
    claims.store.run(renew_held_steps(claims, leases, held, now))


def renew_held_steps(
    claims: Claims, leases: HeldLeases, held: list[Key], now: datetime
) -> Steps[None]:
    """Renew the leases of ``held`` to ``now + lease`` (database time) and track what the
    server acknowledged: when the renewal found fewer than ``held``, one more ``find`` tells
    which were lost (taken over after a pause, replaced, cancelled). A procedure (see
    :mod:`flowsched.mongo.commands`): both faces renew by it."""
    lease_until = truncate_ms(capped(now, claims.lease))
    found = yield from claims.renew_steps(held, now)
    if found >= len(held):
        leases.renewed(held, lease_until)
        return
    generations = {key: leases.generation(key) for key in held}
    kept, gone = yield from holding_detail_steps(claims, generations)
    leases.renewed(kept, lease_until)
    leases.lost((key for key in held if key not in kept), gone)


def holding_detail_steps(
    claims: Claims, generations: Mapping[tuple[Any, str], int | None]
) -> Steps[tuple[set[tuple[Any, str]], set[tuple[Any, str]]]]:
    """Which (id, token) pairs of ``generations`` this node still holds, and which are
    *gone*: their item cancelled, or replaced (stored under another generation than the
    one claimed, given as the value; ``None``: not known, only a cancel counts). One
    ``find`` by ids."""
    if not generations:
        return set(), set()
    ids = sorted({item_id for item_id, _ in generations}, key=repr)
    projection = {"claim.token": 1, "claim.owner": 1, "generation": 1}
    found: list[Doc] = yield Find("items", claims.store.keys(ids), projection)
    stored = {repr(doc["_id"]): doc for doc in found}
    kept: set[tuple[Any, str]] = set()
    gone: set[tuple[Any, str]] = set()
    for key, generation in generations.items():
        doc = stored.get(repr(key[0]))
        claim = doc.get("claim") if doc is not None else None
        if doc is None or (generation is not None and doc.get("generation") != generation):
            gone.add(key)
        elif (
            isinstance(claim, Mapping)
            and claim.get("token") == key[1]
            and claim.get("owner") == claims.owner
        ):
            kept.add(key)
    return kept, gone
