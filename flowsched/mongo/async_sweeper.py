"""Internal: the firing task of ``AsyncMongoScheduler`` - claims, delivery tasks, settles, renews.

The asyncio twin of the *driving* in :mod:`flowsched.mongo.sweeper` (a thread and a pool
there, one task and a task per delivery here); the claims, settlements, renewals and their
fences are the same procedures (:mod:`flowsched.mongo.commands`), run by the asyncio driver.
Each turn of the firing task:

1. renews the leases of the claims still held (every third of the lease), tracking which
   renewals the server acknowledged (:func:`~flowsched.mongo.leases.renew_held_steps`);
2. writes the outcomes of finished deliveries in one fenced ``bulk_write`` and, at the same
   time, when there is room for half a batch, claims a batch (suspect claims marked started
   before their handlers run) and spawns a delivery task per claim (:data:`SPAWN_SLICE` per
   turn of the loop), and renews the node's heartbeat when it is due (every poll, at once
   when the routes changed: :class:`~flowsched.mongo.nodes.Heartbeat`);
3. on an error, logs it once per outage (and the recovery, with the outage's length: the
   threaded node's :class:`~flowsched.mongo.transient.OutageLog`) and backs off over the same
   range (:data:`~flowsched.mongo.transient.SWEEP_BACKOFF`);
4. sleeps until the next item the claim saw coming (at most a poll; at once after a full
   batch; every :data:`~flowsched.mongo.pacing.FLUSH_INTERVAL` while deliveries run), or
   until rung: a local ``schedule`` due sooner, a change-stream event, a free slot.

A delivery cancelled by shutdown is not settled: its claim is given back (``Release``:
claimable at once, the delivery uncounted), so it is delivered again; so are the claims of a
batch still being sorted (:meth:`~flowsched.mongo.claimed_batch.BatchClaimer.take_steps`
pauses between slices of it) or spawned (:data:`SPAWN_SLICE` at a time). The claims that
have a free handler slot start at once: the claim records their start
(:mod:`flowsched.mongo.claim_start`); right before any other handler starts, its claim is
checked in the database (:mod:`flowsched.mongo.start_check`: one ``find`` for every claim
waiting for a slot), so a cancel or replace on any node wins over a claim still waiting.
As on the threaded node (:mod:`flowsched.mongo.leases`, the same
:class:`~flowsched.mongo.leases.HeldLeases`), no handler starts on a claim whose lease has
(nearly) ended by the database's clock - the loop was blocked or the process paused past it,
or a renewal found the claim taken over - it is given back unrun; and a run that completes
after its lease ended is a late completion (logged, counted by the observer, settled fenced
on its generation), not a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import timedelta
from typing import Any, TypeVar

import pymongo
from pymongo.errors import PyMongoError

from flowsched.async_delivery import (
    Alarm,
    AsyncDelivery,
    Deliveries,
    StillRunning,
    cancelled_from_outside,
)
from flowsched.clock import Clock, capped
from flowsched.mongo.claimed_batch import BatchClaimer, ClaimedBatch
from flowsched.mongo.commands import Steps, drive_async
from flowsched.mongo.leases import HeldLeases, renew_held_steps
from flowsched.mongo.local_writes import LocalWrites
from flowsched.mongo.nodes import Heartbeat
from flowsched.mongo.pacing import (
    FLUSH_INTERVAL,
    SHORT_LOOKAHEAD,
    claim_lookahead,
    wait_after_claim,
)
from flowsched.mongo.server_clock import ServerClock, due_now, lease_now
from flowsched.mongo.settlement import Claim, Release, Settlement
from flowsched.mongo.start_check import AsyncStartChecks
from flowsched.mongo.transient import OutageLog, refused_for_good, sweep_backoff

__all__ = ["AsyncSweeper"]

log = logging.getLogger("flowsched.mongo")

T = TypeVar("T")

SPAWN_SLICE = 25
"""Delivery tasks spawned per turn of the loop: a claimed batch's are spawned in slices with
a yield between them (200 tasks' first steps in one turn held the loop for several ms)."""


class AsyncSweeper:
    """Claims due items on the running loop and delivers each in a task of its own."""

    def __init__(
        self,
        claimer: BatchClaimer,
        delivery: AsyncDelivery,
        clock: Clock,
        *,
        concurrency: int,
        batch_size: int,
        poll_interval: timedelta,
        local_writes: LocalWrites,
        heartbeat: Heartbeat | None = None,
        op_timeout: timedelta = timedelta(seconds=10),
    ) -> None:
        """``heartbeat``: the node's advertisement, renewed by the firing task and removed by
        :meth:`close` (within ``op_timeout``)."""
        self._claimer = claimer
        self._heartbeat = heartbeat
        self._op_timeout = op_timeout
        self._claims = claimer.claims
        self._store = claimer.claims.store
        self._delivery = delivery
        self._at_once = delivery.threads_at_once
        self._clock = clock
        self.alarm = Alarm()
        # Claimed deliveries may wait for a handler slot (up to two batches' worth per slot
        # count, as the threaded sweeper holds PIPELINE batches): claims stay large while at
        # most ``concurrency`` handlers run.
        self.deliveries = Deliveries(2 * concurrency, self.alarm.ring)
        self._running = asyncio.Semaphore(concurrency)
        self._concurrency = concurrency
        self._batch_size = batch_size
        self._poll_interval = poll_interval
        self._poll = poll_interval.total_seconds()
        self._renew_every = claimer.claims.lease.total_seconds() / 3
        self._local_writes = local_writes
        self._held: dict[tuple[Any, str], Claim] = {}
        self._leases = HeldLeases(claimer.claims.lease)  # when each held claim's lease ends
        self._checks = AsyncStartChecks(self._claims, self._leases, self._bounded)
        self._finished: list[Settlement] = []
        self.sleeping_until: Any = None
        """When the firing task wakes next (``None``: it is not sleeping)."""
        self.closing = False
        self.closed = False
        """:meth:`close` has written the outcomes: one finished after that is written by its
        own delivery (a handler that closed the scheduler itself)."""
        self.sweeping = False
        """Whether the node claims back to back: the last claim found due items and the
        next is at most SHORT_LOOKAHEAD away (the change stream is not read meanwhile: see
        :mod:`flowsched.mongo.change_stream`)."""

    async def _run(self, steps: Steps[T]) -> T:
        # Each call bounded, as the threaded sweeper bounds its turns: in an outage it fails
        # within op_timeout (the driver's server selection alone waits 30 s) and the turn is
        # retried. Per call, not per turn: a delivery task spawned in a turn must not inherit
        # the deadline (its handler's own driver calls are not ours to bound).
        with self._bounded():
            return await drive_async(steps, self._store)

    def _bounded(self) -> contextlib.AbstractContextManager[None]:
        return pymongo.timeout(self._op_timeout.total_seconds())

    async def fire(self) -> None:
        """The firing task: turns until cancelled; an error is logged and retried after a
        backoff (outcomes not written are kept for the next turn)."""
        backoff = sweep_backoff()
        outage = OutageLog(self._claims.owner, time.monotonic)  # one line per outage + recovery
        behind = busy = False
        next_renew = 0.0
        while not self.closing:
            started = time.monotonic()
            try:
                clock = self._clock
                if isinstance(clock, ServerClock) and clock.due():
                    with self._bounded():
                        await clock.refresh_async(self._store.items.database.command)
                if self._held and time.monotonic() >= next_renew:
                    next_renew = time.monotonic() + self._renew_every
                    await self._run(
                        renew_held_steps(
                            self._claims, self._leases, list(self._held), self._clock.now()
                        )
                    )
                # The last batch's outcomes are written while the next batch is claimed (two
                # requests in flight, as the threaded sweeper pipelines its batches), and the
                # heartbeat beside them when due (it logs its own errors).
                flushed, claimed, _ = await asyncio.gather(
                    self.flush(), self._claim(behind, busy), self._beat(), return_exceptions=True
                )
                for outcome in (flushed, claimed):
                    if isinstance(outcome, BaseException):
                        raise outcome
                assert not isinstance(claimed, BaseException)
                wait, behind, busy = claimed
                self.sweeping = behind or (busy and wait <= SHORT_LOOKAHEAD.total_seconds())
                if outage.succeeded():
                    backoff.reset()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                outage.failed(exc, started)
                wait = backoff.next()
            if len(self.deliveries) or self._finished:
                wait = min(wait, FLUSH_INTERVAL)
            self.sleeping_until = capped(self._clock.now(), timedelta(seconds=wait))
            try:
                await self.alarm.sleep(wait)
            finally:
                self.sleeping_until = None

    async def _beat(self) -> None:
        if self._heartbeat is not None:
            routes = self._claimer.core.routes()
            await self._run(self._heartbeat.beat_when_due_steps(routes, self._clock, self._poll))

    async def _claim(self, behind: bool, busy: bool) -> tuple[float, bool, bool]:
        """One claim if there is room: (seconds to wait, behind, busy)."""
        room = self.deliveries.free
        free = min(room, 2 * self._batch_size if behind else self._batch_size)
        if free < max(1, min(self._batch_size, self._concurrency) // 2):
            return self._poll, behind, busy
        lookahead = claim_lookahead(self._poll_interval, behind=behind, busy=busy)
        # As many as there are free handler slots start at once: the claim records it.
        slots = self._concurrency - len(self.deliveries)  # a caller's executor: checked
        batch = await self._take(free, lookahead, start=slots if self._at_once else 0)
        if batch is None:
            return self._poll, behind, busy
        # Quarantined documents took places in the batch: more may be due behind them.
        behind = batch.due + batch.quarantined >= free
        busy = batch.due > 0
        if behind:
            return 0.0, behind, busy
        ahead = None
        if batch.next_ready is not None:
            ahead = (batch.next_ready - due_now(self._clock)).total_seconds()
        return wait_after_claim(ahead, lookahead, self._poll, found_due=busy), behind, busy

    async def _take(
        self,
        limit: int,
        lookahead: timedelta = timedelta(0),
        *,
        wait: bool = False,
        start: int = 0,
    ) -> ClaimedBatch | None:
        """Claim up to ``limit`` items and spawn their deliveries (``wait``: await each in
        turn, as virtual time does: each checked before it starts); the batch (``None``: no
        route served). ``start``: how many start at once (free slots: the claim records
        their start, :mod:`flowsched.mongo.claim_start`); the others are checked first."""
        if not self._claimer.core.routes():
            return None
        stamp = self._local_writes.open()
        try:
            give_back = self._finished.extend  # shut down while the claim sorts its batch
            start = 0 if wait else start
            steps = self._claimer.take_steps(
                limit, lookahead, mark=True, give_back=give_back, start=start
            )
            batch = await self._run(steps)
            self._local_writes.hold(stamp, len(batch.deliver))  # closed by each delivery
        finally:
            self._local_writes.close(stamp)
        self._finished.extend(batch.settle)
        for claim in batch.deliver:
            self._held[(claim.item.id, claim.token)] = claim
        if batch.lease_until is not None:
            self._leases.claimed_claims(batch.deliver, batch.lease_until)
        self._checks.queued(batch.deliver)  # each waits for a slot
        for n, claim in enumerate(batch.deliver):
            if n and not wait and n % SPAWN_SLICE == 0:
                await self._breathe(batch.deliver[n:], stamp)
            task = self.deliveries.spawn(self._deliver(claim, stamp))
            if wait:
                try:
                    await task
                except asyncio.CancelledError:
                    if cancelled_from_outside():
                        raise  # else the delivery was cancelled (a bounded aclose)
        return batch

    async def _breathe(self, unspawned: list[Claim], stamp: int) -> None:
        """Yield to the loop between slices of a batch's delivery tasks (the tasks of one
        slice take their first steps meanwhile), so that no turn of the loop runs a whole
        batch's. Cancelled here (shutdown), the claims not spawned yet are given back."""
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            for claim in unspawned:
                self._checks.forget(claim)
                self._finish(Settlement.of(claim, Release(claim.item.due, claim.attempt)))
                self._local_writes.close(stamp)
            raise

    async def _deliver(self, claim: Claim, stamp: int) -> None:
        """One delivery task: skip a stale or lapsed claim, run, keep the outcome for the
        next write. Cancelled (shutdown), the claim is given back undelivered."""
        try:
            async with self._running:  # at most `concurrency` handlers at once
                self._checks.taken(claim)
                skip = self.closing or self._local_writes.stale(stamp, claim.item)
                # Still ours in the database, right before the handler (no await after it).
                skip = skip or not await self._checks.may_start(claim)
                self._checks.forget(claim)
                skip = skip or self.closing or self._local_writes.stale(stamp, claim.item)
                # Blocked or paused past its lease (or lost it): another node may hold it now.
                if skip or self._leases.lapsed(claim, lease_now(self._clock)):
                    self._finish(Settlement.of(claim, Release(claim.item.due, claim.attempt)))
                    return
                try:
                    outcome = await self._delivery.run(claim.item, claim.attempt)
                except StillRunning:
                    # Its handler runs on in a worker thread: the claim is kept (no longer
                    # renewed), so no node runs this attempt beside it before the lease ends.
                    raise
                except BaseException:
                    self._finish(Settlement.of(claim, Release(claim.item.due, claim.attempt)))
                    raise
                settlement = Settlement.of(claim, outcome)
                observer = self._claimer.core.observer
                now = self._clock.now()
                self._finish(self._leases.finished(settlement, claim, now, observer))
                if self.closed:  # its handler closed the scheduler: nobody else writes it now
                    await self._flush_after_close()
        except asyncio.CancelledError as exc:
            self._checks.forget(claim)
            held = (claim.item.id, claim.token) in self._held
            if held and not isinstance(exc, StillRunning) and not self._released(claim):
                # cancelled while waiting for a slot: given back, never started
                self._finish(Settlement.of(claim, Release(claim.item.due, claim.attempt)))
            raise
        finally:
            self._local_writes.close(stamp)

    def _released(self, claim: Claim) -> bool:
        key = (claim.item.id, claim.token)
        return any((s.item_id, s.token) == key for s in self._finished)

    def _finish(self, settlement: Settlement) -> None:
        self._finished.append(settlement)
        if len(self.deliveries) <= 1:
            self.alarm.ring()  # the last one running: write now

    async def flush(self) -> None:
        """Write the finished outcomes in one fenced bulk write; kept for the next turn on a
        transient error; those that cannot be written are dropped one by one (their claims
        run out and the items are delivered again)."""
        if not self._finished:
            return
        batch, self._finished = self._finished, []
        try:
            try:
                await self._run(self._claims.settle_steps(batch, self._clock.now()))
            except Exception as exc:
                if not refused_for_good(exc):
                    raise
                log.error("outcomes refused (%s): writing them one by one", exc)
                await self._run(self._claims.settle_each_steps(batch, self._clock.now))
        except BaseException:
            self._finished[:0] = batch
            raise
        for settlement in batch:
            self._held.pop((settlement.item_id, settlement.token), None)
        self._leases.forget((s.item_id, s.token) for s in batch)

    async def _flush_after_close(self) -> None:
        try:
            await self.flush()
        except Exception as exc:  # nothing lost: the claim runs out and is redelivered
            log.warning("%s closed: could not write an outcome: %s", self._claims.owner, exc)

    async def run_due(self) -> int:
        """Deliver every item due by the clock's now, awaiting each (virtual time); how many
        ran. Sweeps until a claim finds nothing, so follow-ups due by now run too."""
        delivered = 0
        while not self.closing:
            batch = await self._take(self._batch_size, wait=True)
            await self.flush()
            if batch is None or (not batch.won and not batch.quarantined):
                return delivered
            delivered += len(batch.deliver)
        return delivered

    async def close(self, timeout: float | None) -> None:
        """Wait for the deliveries in flight (cancel those still running after ``timeout``
        seconds), then write every outcome, withdraw the heartbeat and shut the handlers'
        own thread pool (even if withdrawing fails)."""
        self.closing = True
        try:
            await self.deliveries.drain(timeout)
            try:
                await self.flush()
            except PyMongoError as exc:  # nothing lost: the claims run out and are redelivered
                log.warning("%s closing: could not write outcomes: %s", self._claims.owner, exc)
            self.closed = True
        finally:
            try:
                if self._heartbeat is not None:  # withdrawn: the node no longer serves its routes
                    await self._run(self._heartbeat.remove_steps())  # bounded in an outage
            finally:
                self._delivery.close()
