"""Internal: the simulation loop — one seeded history of a cluster in virtual time.

One thread, no real time. A heap of timed actions (each node's sweeps, the plan's events,
lease renewals, client retries) is run in time order; a handler that takes time runs the heap
until its end (other nodes sweep, claim and run while it is "busy"): so interleavings inside a
delivery arise (a node paused mid-batch, a handler outliving its lease, a replace landing).
"""

from __future__ import annotations

import functools
import heapq
import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import mongomock
from pymongo.errors import PyMongoError

from flowsched.errors import SchedulerUnavailable
from flowsched.mongo.documents import bson_utc
from flowsched.records import ScheduleItem
from flowsched.store.records import Claim
from flowsched.testing.simulation._clients import Clients
from flowsched.testing.simulation._history import ClaimRecord, History, Run
from flowsched.testing.simulation._node import KIND, Before, SimNode, batch_token
from flowsched.testing.simulation._plan import (
    Cancel,
    Event,
    Faults,
    Kill,
    Lossy,
    Outage,
    Pause,
    Schedule,
    Settings,
    Skew,
    Slow,
    Wakeup,
    fault_end,
)
from flowsched.testing.simulation._world import EPOCH, ReferenceClock, StoreFaults

__all__ = ["Simulation"]


class _Killed(KeyboardInterrupt):
    """Unwinds a killed node's handler: like an interrupt, it passes the delivery core."""


class _Halted(KeyboardInterrupt):
    """Unwinds a node's ``run_due`` once an invariant broke (the run is over; a node whose
    bug makes it claim and run at one instant for ever would not return)."""


class _PlannedFailure(RuntimeError):
    """What a handler told to fail raises."""


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


class Simulation:
    """One seed's cluster: build it, :meth:`run` it, read ``history`` and ``trace``."""

    def __init__(
        self, seed: int, settings: Settings, faults: Faults, plan: list[tuple[int, Event]]
    ) -> None:
        self.seed = seed
        self.settings = settings
        self.faults = faults
        self.plan = plan
        self.rng = random.Random(seed)
        self.reference = ReferenceClock()
        self.store_faults = StoreFaults(seed, stall=self._stall)
        self.raw: Any = mongomock.MongoClient()["simulation"]["timers"]
        self.history = History(tolerance=settings.poll + 1.0)
        self.trace: list[str] = []
        self.lease = settings.lease
        self.quiet = False
        self.quiet_at = settings.horizon
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._pushed = 0
        self._now_ms = 0
        self._tokens: dict[str, int] = {}
        self._generations: dict[tuple[str, int], int] = {}
        self._latest: dict[str, ClaimRecord] = {}
        self._runs_of: dict[str, int] = {}
        self._holding = 0  # handlers taking virtual time now (at most one: see _run)
        self.nodes = [
            SimNode(
                index,
                seed,
                self.raw,
                self.reference,
                self.store_faults,
                lease=settings.lease,
                poll=settings.poll,
                batch=settings.batch,
                before_take=self._before_take,
                on_take=self._taken,
                on_settled=self._settled,
                on_renewed=self._leases_written,
            )
            for index in range(settings.nodes)
        ]
        for node in self.nodes:
            node.scheduler.subscribe(KIND, self._handler(node))
        self.clients = Clients(self)

    # -- time ----------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self._now_ms / 1000

    def _set(self, ms: int) -> None:
        if ms > self._now_ms:
            self._now_ms = ms
            self.reference.now = EPOCH + timedelta(milliseconds=ms)

    def at(self, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` at ``seconds`` of virtual time (now, if that has passed)."""
        self._pushed += 1
        heapq.heappush(self._heap, (max(_ms(seconds), self._now_ms), self._pushed, action))

    def run_until(self, seconds: float) -> None:
        """Run every action due by ``seconds``, then rest there (unless an invariant broke)."""
        limit = _ms(seconds)
        heap = self._heap
        while heap and heap[0][0] <= limit and self.history.broken is None:
            ms, _, action = heapq.heappop(heap)
            self._set(ms)
            action()
        if self.history.broken is None:
            self._set(limit)

    def log(self, who: str, text: str) -> None:
        self.trace.append(f"{self.now:9.3f} {who:>3} {text}")

    # -- the whole run -------------------------------------------------------------------

    def run(self) -> None:
        settings = self.settings
        for index, event in self.plan:
            self.at(event.at, functools.partial(self._event, index, event))
        for node in self.nodes:
            self.at(
                round(self.rng.uniform(0, settings.poll), 3), functools.partial(self._poll, node)
            )
        self.quiet_at = max([settings.horizon, *(fault_end(event) for _, event in self.plan)])
        self.run_until(self.quiet_at)
        self.quiet = True
        for node in self.nodes:
            node.kill_pending, node.pause_pending = False, None
        self.log("", "faults over: draining")
        while self.history.broken is None and self.now < self.quiet_at + settings.drain:
            self.run_until(self.now + settings.poll)
            if not self.history.undelivered(self.quiet_at, self._stored()):
                break
        if self.history.broken is None:
            self.history.judge_delivered(self.now, self.quiet_at, self._stored())

    def _stored(self) -> set[str]:
        return {str(doc["_id"]) for doc in self.raw.find({}, {"_id": 1})}

    # -- the plan's events ---------------------------------------------------------------

    def _event(self, index: int, event: Event) -> None:
        self.log("", f"[{index}] {event.describe()}")
        if isinstance(event, Schedule | Cancel):
            self.clients.call(event)
        elif isinstance(event, Kill):
            node = self.nodes[event.node]
            if not node.dead and sum(not n.dead for n in self.nodes) > 1:
                node.kill_pending = True
                self.at(self.now + 5, lambda: self._idle_kill(node))
        elif isinstance(event, Pause):
            node = self.nodes[event.node]
            node.pause_pending = event.seconds
            self.at(self.now + 5, lambda: self._idle_pause(node))
        elif isinstance(event, Outage):
            self.store_faults.outages.append(self._window(event.seconds))
        elif isinstance(event, Lossy):
            self.store_faults.lossy.append(self._window(event.seconds))
        elif isinstance(event, Slow):
            self.store_faults.slow.append(self._window(event.seconds))
        elif isinstance(event, Skew):
            self.nodes[event.node].clock.skew = timedelta(seconds=event.seconds)
        elif isinstance(event, Wakeup):
            self._poll(self.nodes[event.node], chain=False)

    def _window(self, seconds: float) -> tuple[Any, Any]:
        start = self.reference.now
        return start, start + timedelta(seconds=seconds)

    def _idle_kill(self, node: SimNode) -> None:
        if node.kill_pending and not self.quiet:
            node.kill_pending = False
            self._die(node)

    def _idle_pause(self, node: SimNode) -> None:
        if node.pause_pending is not None and not self.quiet:
            node.paused_until = max(node.paused_until, self.now + node.pause_pending)
            node.pause_pending = None
            self.log(node.name, f"paused until {node.paused_until:.3f}s")

    def _die(self, node: SimNode) -> None:
        if not node.dead:
            node.dead = True
            self.log(node.name, "killed (claims it holds lapse)")

    # -- sweeps and leases ---------------------------------------------------------------

    def _poll(self, node: SimNode, chain: bool = True) -> None:
        if node.dead:
            return
        if node.busy or node.paused_until > self.now:
            if chain:
                self.at(
                    max(self.now + self.settings.poll, node.paused_until), lambda: self._poll(node)
                )
            return
        node.busy = True
        node.records = []
        try:
            ran = node.scheduler.run_due()
            if ran:
                self.log(node.name, f"sweep: ran {ran}")
        except _Killed:
            self._die(node)
        except _Halted:
            pass
        except (SchedulerUnavailable, PyMongoError) as exc:
            self.log(node.name, f"sweep failed: {type(exc).__name__}")
        finally:
            node.busy = False
        if chain and not node.dead:
            self.at(self.now + self.settings.poll, lambda: self._poll(node))

    def _before_take(self, node: SimNode) -> Before:
        """When ``node``'s claim begins (its order, its lease's start) and the claims whose
        lease is live then (to tell a claim that takes one from one that takes a free one)."""
        seq, now = self.history.next_seq(), self.now
        live = [i for i, record in self._latest.items() if record.live_at(now)]
        if not live:
            return Before(seq, now, {})
        found = self.raw.find({"_id": {"$in": live}}, {"claim": 1})
        claims = {
            doc["_id"]: (doc["claim"].get("token"), doc["claim"].get("lease_until"))
            for doc in found
            if doc.get("claim")
        }
        return Before(seq, now, claims)

    def _taken(self, node: SimNode, won: list[Claim], before: Before) -> None:
        """Record what ``node`` won (called by its store right after the claim)."""
        if not won:
            return
        now, lease = before.now, self.lease
        ids = [claim.item.id for claim in won]
        docs = {doc["_id"]: doc for doc in self.raw.find({"_id": {"$in": ids}}, {"claim": 1})}
        names = []
        for claim in won:
            item = claim.item.id
            raw_token = batch_token(claim)
            token = self._token(raw_token)
            raw_claim = (docs.get(item) or {}).get("claim") or {}
            earlier = self._latest.get(item)
            # The lease it took was live if the document still carried the earlier claim as
            # last written (not settled, released or moved since) and it had not run out.
            held_by = None
            if (
                earlier is not None
                and earlier.live_at(now)
                and earlier.token != token
                and before.claims.get(item) == (earlier.raw_token, earlier.lease_raw)
            ):
                held_by = earlier
            record = ClaimRecord(
                node.name,
                item,
                token,
                before.seq,
                now,
                self._lease_end(now + lease, raw_claim.get("lease_until")),
                raw_claim.get("lease_until"),
                raw_token=raw_token,
            )
            self.history.claimed(record, held_by)
            self._latest[item] = record
            node.records.append(record)
            names.append(f"{item}#{self.generation(item, claim.item.generation)}")
        token = self._token(batch_token(won[0]))
        self.log(node.name, f"claimed {', '.join(names)} (token {token})")
        if not node.renewing:
            node.renewing = True
            self.at(self.now + lease / 3, lambda: self._renew(node))

    def _settled(self, node: SimNode, claims: Sequence[Claim]) -> None:
        """``node``'s settle of ``claims`` returned: they hold nothing since (a stale one
        held nothing before either)."""
        for claim in claims:
            record = self.history.claims.get((claim.item.id, self._token(batch_token(claim))))
            if record is not None:
                record.settled = True

    def _renew(self, node: SimNode) -> None:
        if node.dead or not node.held:
            node.renewing = False
            return
        if node.paused_until <= self.now and node.starved_until <= self.now:
            try:
                node.renew()
            except (SchedulerUnavailable, PyMongoError) as exc:
                self.log(node.name, f"renewal failed: {type(exc).__name__}")
        self.at(self.now + self.lease / 3, lambda: self._renew(node))

    def _leases_written(self, node: SimNode, claims: Sequence[Claim]) -> None:
        """Move the lease ends of ``claims`` whose ``lease_until`` a renewal changed (called
        after every renewal, the simulator's or the node core's, answered or not)."""
        ids = [claim.item.id for claim in claims]
        docs = {doc["_id"]: doc for doc in self.raw.find({"_id": {"$in": ids}}, {"claim": 1})}
        for claim in claims:
            raw_token = batch_token(claim)
            record = self.history.claims.get((claim.item.id, self._token(raw_token)))
            raw_claim = (docs.get(claim.item.id) or {}).get("claim") or {}
            if record is None or raw_claim.get("token") != raw_token:
                continue
            if raw_claim.get("lease_until") != record.lease_raw:
                record.lease_raw = raw_claim.get("lease_until")
                record.lease_end = self._lease_end(self.now + self.lease, record.lease_raw)

    @staticmethod
    def _lease_end(nominal: float, stored: Any) -> float:
        """A lease's end (whole ms): as stored, which every node judges by (written from a
        safe-side clock estimate: a few ms before ``nominal``), never after ``nominal``."""
        at = (bson_utc(stored) - EPOCH).total_seconds() if isinstance(stored, datetime) else nominal
        return round(min(nominal, at), 3)

    def _token(self, token: str) -> int:
        return self._tokens.setdefault(token, len(self._tokens) + 1)

    def generation(self, item: str, generation: int) -> int:
        key = (item, generation)
        if key not in self._generations:
            self._generations[key] = 1 + sum(1 for i, _ in self._generations if i == item)
            self.history.generation_seen(item, self._generations[key])
        return self._generations[key]

    # -- handlers ------------------------------------------------------------------------

    def _handler(self, node: SimNode) -> Callable[[ScheduleItem, int], None]:
        def handle(item: ScheduleItem, attempt: int) -> None:
            self._run(node, item, attempt)

        return handle

    def _run(self, node: SimNode, item: ScheduleItem, attempt: int) -> None:
        item_id = item.id
        count = self._runs_of[item_id] = self._runs_of.get(item_id, 0) + 1
        rng = random.Random(f"{self.seed}:{item_id}:{count}")
        generation = self.generation(item_id, item.generation)
        due = (item.due - EPOCH).total_seconds()
        slot = due if item.recurrence is not None else None
        claim = next((r for r in reversed(node.records) if r.item == item_id), None)
        run = Run(node.name, item_id, generation, attempt, slot, claim, self.now)
        self.log(node.name, f"run {item_id}#{generation} attempt {attempt} (due {due:.3f}s)")
        self.history.started(run, due)
        if self.history.broken is not None:
            raise _Halted
        latency, fail, starve, race = self._behaviour(rng)
        if race is not None:
            self.clients.race(node, rng, race)
        if self._holding:
            # Another handler is taking time (this one runs inside it, on one stack): this
            # one takes none, or the outer handler would last until this one ends.
            latency, starve = 0.0, False
        elif node.kill_pending and not self.quiet:
            node.kill_pending = False
            node.dies_at = self.now + round(rng.uniform(0, 2), 3)
        elif node.pause_pending is not None and not self.quiet:
            node.paused_until = max(node.paused_until, self.now + node.pause_pending)
            node.pause_pending = None
            self.log(node.name, f"paused mid-handler until {node.paused_until:.3f}s")
        self._holding += 1
        try:
            self._hold(node, latency, starve)
        finally:
            self._holding -= 1
        run.end, run.ok = self.now, not fail
        if fail:
            raise _PlannedFailure(f"planned failure of {item_id}")

    def _behaviour(self, rng: random.Random) -> tuple[float, bool, bool, str | None]:
        """How one run behaves: latency, whether it fails, starves renewals, races."""
        faults, quiet, lease = self.faults, self.quiet, self.lease
        roll = rng.random()
        if roll < 0.55:
            latency = 0.0
        elif roll < 0.9 or quiet or not faults.slow_handlers:
            # A whole batch of these takes less than a lease: only slow handlers (a fault)
            # keep the claims queued behind them waiting past their lease.
            latency = rng.uniform(0.05, lease / (2 * self.settings.batch))
        else:
            latency = rng.uniform(1.1, 2.5) * lease
        starve = not quiet and faults.starved_renewals and latency > lease and rng.random() < 0.5
        fail = not quiet and faults.handler_failures and rng.random() < 0.15
        race = None
        if not quiet and faults.races and rng.random() < 0.2:
            race = rng.choice(("cancel", "replace", "replace-own"))
        return round(latency, 3), fail, starve, race

    def _stall(self, seconds: float) -> None:
        """A slow reply: let ``seconds`` pass (others run) before the caller hears back;
        none while a handler is taking time (one stack: see _run)."""
        if self._holding or self.quiet:
            return
        self._holding += 1
        try:
            self.run_until(self.now + seconds)
        finally:
            self._holding -= 1

    def _hold(self, node: SimNode, seconds: float, starve: bool) -> None:
        """Let ``seconds`` of virtual time pass inside ``node``'s handler (others run), and
        any pause of the node; die there if the node is killed."""
        target = self.now + seconds
        if starve:
            node.starved_until = max(node.starved_until, target)
            self.log(node.name, f"handler holds the GIL until {target:.3f}s (no renewals)")
        while self.history.broken is None:
            end = max(target, node.paused_until)
            if node.dies_at is not None:
                end = min(end, node.dies_at)
            if node.dead or (node.dies_at is not None and self._now_ms >= _ms(node.dies_at)):
                node.dies_at = None
                self._die(node)
                raise _Killed
            if self._now_ms >= _ms(end):
                return
            self.run_until(end)
