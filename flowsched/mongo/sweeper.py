"""Internal: the MongoDB background sweeper thread — claims, dispatches, renews, settles.

Every node runs one; there is no leader. Each turn of the loop writes the outcomes of
finished deliveries (one fenced ``bulk_write``, on a thread of its own: the claim below does
not wait for it, as on the asyncio node), renews the leases still held (every third of the
lease) and the node's heartbeat (every poll, at once when its routes change:
:mod:`flowsched.mongo.nodes`), and, when the poll is due and at least half the batch is free,
claims a batch for the worker pool (after a full claim, all the room left in PIPELINE
batches). The poll is due every ``poll_interval``; at once after a full batch; sooner when
this node schedules an item due before it; at the next item's due time (not sooner than 50
ms, so items due together share a claim; just after it if the claim found nothing due).

Claims for idle workers start at once, their start recorded by the claim
(:mod:`flowsched.mongo.claim_start`); a claim that waits in the queue is checked in the
database right before its handler starts (:mod:`flowsched.mongo.start_check`). No handler
starts on a claim whose lease has (nearly) ended by the database's clock: it is given back,
fenced, unrun; a late completion is not a failure (:mod:`flowsched.mongo.leases`). A
*suspect* claim (:attr:`Claim.suspect`) starts only once its start is marked: the loop
writes every mark asked for with the outcomes (see :mod:`flowsched.mongo.claims`), so a
handler that kills its node runs at most twice per counted attempt.

Errors never end the loop: it logs once per outage (and its end), backs off (SWEEP_BACKOFF),
keeps unwritten outcomes for the next turn (every write is fenced); a settle refused for
good is written one outcome at a time, as on the asyncio node (:func:`refused_for_good`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pymongo

from flowsched.clock import Clock, capped
from flowsched.delivery import DeliveryCore, Redeliver
from flowsched.mongo.claimed_batch import BatchClaimer
from flowsched.mongo.claims import Claims
from flowsched.mongo.leases import HeldLeases, renew_held
from flowsched.mongo.local_writes import LocalWrites
from flowsched.mongo.nodes import Heartbeat
from flowsched.mongo.pacing import (
    BATCH_GAP,
    FLUSH_INTERVAL,
    PIPELINE,
    SHORT_LOOKAHEAD,
    START_GATHER,
    claim_lookahead,
    wait_after_claim,
)
from flowsched.mongo.server_clock import due_now, lease_now
from flowsched.mongo.settlement import Claim, Release, Settlement
from flowsched.mongo.start_check import ThreadStartChecks
from flowsched.mongo.transient import OutageLog, refused_for_good, sweep_backoff, within

__all__ = ["Sweeper"]

log = logging.getLogger("flowsched.mongo")


class Sweeper:
    """Claims due items in the background and delivers them on a pool of ``workers`` threads."""

    def __init__(
        self,
        claimer: BatchClaimer,
        *,
        poll_interval: timedelta,
        batch_size: int,
        workers: int,
        op_timeout: timedelta,
        fence: LocalWrites,
        heartbeat: Heartbeat | None = None,
        on_start: Callable[[], object] | None = None,
    ) -> None:
        """``heartbeat``: renewed each poll, removed on stop; ``on_start``: run first."""
        self._claimer = claimer
        self._heartbeat = heartbeat
        self._on_start = on_start
        self._local_writes = fence
        self._claims: Claims = claimer.claims
        self._core: DeliveryCore = claimer.core
        self._clock: Clock = claimer.clock
        self._poll = poll_interval.total_seconds()
        self._lookahead = poll_interval
        self._renew_every = claimer.claims.lease.total_seconds() / 3
        self._batch = batch_size
        self._op_timeout = op_timeout
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="flowsched-mongo")
        self._settler = ThreadPoolExecutor(1, thread_name_prefix="flowsched-settle")
        self._settling: set[tuple[Any, str]] = set()  # held claims whose outcomes are written
        self._workers = workers
        self._queued = 0  # claims handed to the pool that no worker has taken yet
        self._asked_at = math.inf  # when the oldest start mark not yet written was asked
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when a handler returns
        self._running = 0  # handlers running now
        self._worker = threading.local()  # .on: this thread is one of the pool's workers
        self._flush_inline = False  # closed from a handler: deliveries write their outcomes
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._closing = False
        self._held: dict[tuple[Any, str], Claim] = {}
        self._leases = HeldLeases(self._claims.lease)  # when each held claim's lease ends
        self._checks = ThreadStartChecks(self._claims, self._leases, op_timeout.total_seconds())
        # Start marks: asked for by workers, being written, written (until its worker reads it).
        self._starting: list[Claim] = []
        self._marking: list[Claim] = []
        self._marked: set[tuple[Any, str]] = set()
        self._marks = threading.Condition(self._lock)
        self._finished: list[Settlement] = []
        self._finished_at = math.inf  # when the oldest unwritten outcome in _finished came
        self._unwritten: list[Settlement] = []
        self._next_poll = 0.0
        # The earliest sweep poke() asked for while a claim ran (that claim may not see it).
        self._poked = math.inf
        self._claimed_at = -math.inf  # when the last claim began (monotonic)
        self._next_renew = 0.0
        self._behind = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="flowsched-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def sweeping(self) -> bool:
        """Claiming back to back: the change stream is left unread (see ``change_stream``)."""
        soon = self._next_poll - self._clock.monotonic() <= SHORT_LOOKAHEAD.total_seconds()
        return self._behind or (self._busy and soon)

    def poke(self, due: datetime | None = None) -> None:
        """Sweep at ``due`` (or now) if that is before the next planned poll; not sooner than
        BATCH_GAP after the last claim began (a burst of pokes is claimed in batches)."""
        delay = 0.0 if due is None else (due - self._clock.now()).total_seconds()
        at = self._clock.monotonic() + max(delay, 0.0)
        with self._lock:
            at = max(at, self._claimed_at + BATCH_GAP)
            self._poked = min(self._poked, at)
            if at >= self._next_poll:
                return
            self._next_poll = at
        self._wake.set()

    def stop(self) -> None:
        """Stop claiming, wait for running handlers, give back queued claims, write outcomes.
        From a handler, it waits for the *other* handlers only (its outcome: when it returns)."""
        inside = getattr(self._worker, "on", False)
        with self._lock:
            self._closing = True  # queued deliveries now release their claim instead of running
            self._flush_inline = inside
            self._marks.notify_all()  # workers waiting for a start mark give their claim back
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        self._settler.shutdown(wait=True)
        if inside:
            # A worker cannot join itself (shutdown(wait=True) would raise RuntimeError).
            self._pool.shutdown(wait=False)
            with self._idle:
                self._idle.wait_for(lambda: self._running <= 1)
        else:
            self._pool.shutdown(wait=True)
        self._write_outcomes("on close")
        if self._heartbeat is not None:
            with pymongo.timeout(self._op_timeout.total_seconds()):  # bounded in an outage
                self._heartbeat.remove()

    def _write_outcomes(self, when: str) -> None:
        try:
            within(self._op_timeout, f"writing outcomes {when}", self._flush)
        except Exception as exc:  # nothing lost: redelivered after the lease
            log.warning("could not write outcomes %s (redelivered after the lease): %s", when, exc)

    # -- the loop ---------------------------------------------------------------------------

    def _run(self) -> None:
        if self._on_start is not None:
            try:
                with pymongo.timeout(self._op_timeout.total_seconds()):
                    self._on_start()
            except Exception as exc:
                log.debug("sweeper of %s: start-up check failed: %s", self._claims.owner, exc)
        backoff = sweep_backoff()
        outage = OutageLog(self._claims.owner, self._clock.monotonic)
        while not self._stop.is_set():
            started = self._clock.monotonic()
            try:
                # Bounded: an outage cannot hold the loop (and close()) for 30 s.
                with pymongo.timeout(self._op_timeout.total_seconds()):
                    self._claims.store.ensure_indexes()
                    self._turn()
            except Exception as exc:
                outage.failed(exc, started)
                self._wake.wait(backoff.next())
                self._wake.clear()
                continue
            if outage.succeeded():
                backoff.reset()
            self._wake.wait(self._wait())
            self._wake.clear()

    def _turn(self) -> None:
        self._renew()  # every third of the lease; before the settle takes any claim away
        outcomes = self._outcomes()  # written while the claim runs, which counts their room
        settling = self._settler.submit(self._settle, *outcomes)
        try:
            self._beat()
            settle = self._claim()
        finally:
            error = settling.exception()  # one settle at a time: the turn waits for it
        if error is not None:
            raise error
        if settle:  # what the claim settled itself (quarantines, lost deliveries)
            self._flush()

    def _settle(self, batch: list[Settlement], starts: list[Claim]) -> None:
        with pymongo.timeout(self._op_timeout.total_seconds()):  # bounded, as the turn is
            self._write(batch, starts)

    def _claim(self) -> bool:
        now = self._clock.monotonic()
        with self._lock:
            poll_due = now >= self._next_poll
            # Claims whose outcomes are being written leave room (as on the asyncio node).
            room = PIPELINE * self._batch - len(self._held.keys() - self._settling)
        # Behind (the last claim was full): all the room, up to PIPELINE batches (same cost).
        free = room if self._behind else min(self._batch, room)
        if not poll_due or self._stop.is_set() or free < max(1, self._batch // 2):
            return False
        lookahead = claim_lookahead(self._lookahead, behind=self._behind, busy=self._busy)
        with self._lock:
            self._poked, self._claimed_at = math.inf, now
            # Workers that take no claim now (running or about to): the others start at once.
            idle = self._workers - self._running - self._queued - self._checks.in_hand()
        stamp = self._local_writes.open()
        try:
            batch = self._claimer.take(free, lookahead=lookahead, start=idle)
            self._local_writes.hold(stamp, len(batch.deliver))  # released by each delivery
        finally:
            self._local_writes.close(stamp)
        # Quarantined documents took places in the batch: more may be due behind them.
        self._behind = batch.due + batch.quarantined >= free
        self._busy = batch.due > 0
        with self._lock:
            self._unwritten.extend(batch.settle)
            for claim in batch.deliver:
                self._held[(claim.item.id, claim.token)] = claim
            if batch.lease_until is not None:
                self._leases.claimed_claims(batch.deliver, batch.lease_until)
            # A full batch means more may be due: go again at once. Otherwise wait until the
            # next item the query saw, or to the end of the range it looked at (or poke()).
            if self._next_poll <= now:
                if self._behind:
                    self._next_poll = now
                else:
                    ahead = None  # from the claim's end, on the never-early clock
                    if batch.next_ready is not None:
                        ahead = (batch.next_ready - due_now(self._clock)).total_seconds()
                    wait = wait_after_claim(ahead, lookahead, self._poll, found_due=self._busy)
                    self._next_poll = self._clock.monotonic() + wait
            self._next_poll = min(self._next_poll, self._poked)
            if batch.deliver and self._next_renew <= now:
                self._next_renew = now + self._renew_every
            self._queued += len(batch.deliver)
        self._checks.queued(batch.deliver)
        for claim in batch.deliver:
            self._pool.submit(self._deliver, claim, stamp)
        return bool(batch.settle)

    def _wait(self) -> float:
        now = self._clock.monotonic()
        with self._lock:
            free = min(self._batch, PIPELINE * self._batch - len(self._held))
            deadline = self._next_poll if free >= max(1, self._batch // 2) else float("inf")
            if self._held:
                deadline = min(deadline, now + FLUSH_INTERVAL, self._next_renew)
            if self._finished or self._unwritten:
                deadline = min(deadline, now + FLUSH_INTERVAL)
            if self._starting:  # handlers wait for their start mark
                deadline = now if self._wave_complete() else self._asked_at + START_GATHER
        return max(0.0, min(deadline - now, self._poll))

    # -- delivery, settlement, leases --------------------------------------------------------

    def _outcomes_due(self) -> bool:
        """With start marks to write: whether the outcomes (another command) go too."""
        if self._closing or len(self._finished) >= len(self._held):
            return True
        return self._clock.monotonic() >= self._finished_at + FLUSH_INTERVAL

    def _starts_due(self) -> bool:
        """Whether to write the start marks asked for now (under the lock)."""
        since = self._clock.monotonic() - self._asked_at
        return self._closing or self._wave_complete() or since >= START_GATHER

    def _wave_complete(self) -> bool:
        """Whether no other worker can ask for a start mark now (under the lock): write."""
        idle = self._workers - self._running - len(self._starting) - len(self._marking)
        return idle <= 0 or self._queued <= 0

    def _deliver(self, claim: Claim, stamp: int) -> None:
        self._worker.on = True
        try:
            self._checks.taken(claim)
            with self._lock:
                self._queued -= 1
                # Closing, or cancelled/replaced here since the claim: give it back unrun.
                skip = self._closing or self._local_writes.stale(stamp, claim.item)
            # Only a suspect claim waits for its start mark (see the module's docstring).
            skip = skip or (claim.suspect and not self._await_start(claim))
            # Still ours in the database, right before the handler (flowsched.mongo.start_check)
            skip = skip or not self._checks.may_start(claim)
            with self._lock:
                skip = skip or self._closing or self._local_writes.stale(stamp, claim.item)
                # Paused (or starved) past its lease: another node may hold it now.
                skip = skip or self._leases.lapsed(claim, lease_now(self._clock))
                if not skip:
                    self._running += 1
            self._checks.forget(claim)
            if skip:
                self._finish(Settlement.of(claim, Release(claim.item.due, claim.attempt)))
                return
            try:
                self._finish(self._outcome(claim))
            finally:
                with self._idle:
                    self._running -= 1
                    self._idle.notify_all()
        finally:
            self._local_writes.close(stamp)

    def _await_start(self, claim: Claim) -> bool:
        """Ask the loop to mark ``claim`` started and wait until it is written; ``False``
        if the node closes first (the claim is then given back, never counted)."""
        key = (claim.item.id, claim.token)
        with self._marks:
            if self._closing:
                return False
            if not self._starting:
                self._asked_at = self._clock.monotonic()
            self._starting.append(claim)
            self._wake.set()
            while key not in self._marked:
                if self._closing and claim in self._starting:
                    self._starting.remove(claim)  # not written yet: withdraw it
                    return False
                self._marks.wait()
            self._marked.discard(key)
            return True

    def _outcome(self, claim: Claim) -> Settlement:
        try:
            settlement = Settlement.of(claim, self._core.deliver(claim.item, claim.attempt))
        except BaseException as exc:
            # A KeyboardInterrupt (deliver() turns handler errors into outcomes): settle it
            # as failed (neither lost nor held for ever), then let the interrupt through.
            log.exception("delivery of %s failed outside its handler", claim.item.id)
            failures = claim.attempt + 1
            due = capped(self._clock.now(), self._core.redelivery.delay(failures))
            error = f"{type(exc).__name__}: {exc}"
            self._finish(Settlement.of(claim, Redeliver(due, failures, error)))
            raise
        return self._leases.finished(settlement, claim, self._clock.now(), self._core.observer)

    def _finish(self, settlement: Settlement) -> None:
        with self._lock:
            if not self._finished:
                self._finished_at = self._clock.monotonic()
            self._finished.append(settlement)
            batch_done = len(self._finished) >= len(self._held)
            inline = self._flush_inline
        if inline:  # the sweeper thread is gone: nobody else will write it
            self._write_outcomes("after close")
        elif batch_done:
            self._wake.set()

    def _flush(self) -> None:
        self._write(*self._outcomes())

    def _outcomes(self) -> tuple[list[Settlement], list[Claim]]:
        """The outcomes and start marks to write now, taken (being written from now on)."""
        with self._lock:
            if self._starting and not self._starts_due():
                return [], []  # gathering a wave of start marks: outcomes go with it, shortly
            if not self._starting or self._outcomes_due():
                batch = self._unwritten + self._finished
                self._unwritten, self._finished = [], []
                self._finished_at = math.inf
            else:  # only marks: outcomes (a delete command) wait to be written with more
                batch = []
            starts, self._starting = self._starting, []
            self._marking = starts
            self._asked_at = math.inf
            self._settling = {(s.item_id, s.token) for s in batch}
        return batch, starts

    def _write(self, batch: list[Settlement], starts: list[Claim]) -> None:
        if not batch and not starts:
            return
        try:
            self._claims.settle(batch, self._clock.now(), starts)
        except BaseException as exc:
            if not refused_for_good(exc):
                self._keep(batch, starts)
                raise
            # Refused for good: one by one, dropping only what fails on its own (as async).
            log.error("outcomes refused (%s): writing them one by one", exc)
            try:
                self._claims.settle_each(batch, self._clock.now, starts)
            except BaseException:  # an outage meanwhile: keep them all (settling repeats safely)
                self._keep(batch, starts)
                raise
        with self._lock:
            for settlement in batch:
                self._held.pop((settlement.item_id, settlement.token), None)
            self._leases.forget((s.item_id, s.token) for s in batch)
            self._marked.update((claim.item.id, claim.token) for claim in starts)
            self._marking = []
            self._settling = set()
            self._marks.notify_all()

    def _keep(self, batch: list[Settlement], starts: list[Claim]) -> None:
        with self._lock:
            self._unwritten = batch + self._unwritten
            # Not known to be written (a retry sets the same value, so no double count).
            self._starting = starts + self._starting
            if starts:
                self._asked_at = -math.inf  # due at once on the next try
            self._marking = []
            self._settling = set()
            self._marks.notify_all()

    def _beat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.beat_when_due(self._core.routes(), self._clock, self._poll)

    def _renew(self) -> None:
        now = self._clock.monotonic()
        with self._lock:
            if not self._held or now < self._next_renew:
                return
            held = list(self._held)
        renew_held(self._claims, self._leases, held, self._clock.now())
        with self._lock:
            self._next_renew = now + self._renew_every
