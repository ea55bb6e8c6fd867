"""Internal: one simulated node — a real, never-started ``MongoScheduler`` (the node core over
a :class:`~flowsched.mongo.MongoTimerStore`) on its own clock and its own view of the shared
collection, driven by the simulator's calls to ``run_due``.

The only module of the simulator that reaches inside the scheduler, through narrow seams on
its store (``scheduler.store``, wrapped on the instance): the store's RNG (seeded, so
generations replay); its ``claim_started``/``claim_due`` (observed, to learn what each claim
won and under which token); its ``settle`` and ``renew`` (observed: which claims no longer
hold, which leases moved); and ``renew``, called on the simulator's schedule, as the thread
driver's loop renews the running claims while a handler runs (``run_due`` runs handlers on
the caller's stack, where nothing renews meanwhile). The claim, check, delivery and settle
code that runs is the node core's and the store's own.

Each node has one worker: the simulator runs one handler of a node at a time (one stack).
With one worker for a batch of more than two, the node claims a batch and queues it, as a
threaded MongoDB node does (``flowsched.node.common.starts_on_claim``), and confirms each
claim with the store right before its handler; with a batch of one or two it starts its
claims as it claims them (``claim_started``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from flowsched.mongo.scheduler import MongoScheduler
from flowsched.mongo.timer_store import MongoTimerStore
from flowsched.records import ScheduleKind
from flowsched.redelivery import RedeliveryPolicy
from flowsched.store.records import Claim, Settlement, SettleResult
from flowsched.testing.simulation._world import (
    FaultyCollection,
    NodeClock,
    ReferenceClock,
    StoreFaults,
)

__all__ = ["KIND", "Before", "SimNode", "batch_token"]

KIND = ScheduleKind.TIMER
"""The kind every simulated timer has (one route, served by every node)."""

REDELIVERY = RedeliveryPolicy(initial=timedelta(seconds=1), maximum=timedelta(seconds=4))

OP_TIMEOUT = timedelta(seconds=10)
"""A port call's budget. It is counted in real time (``time.monotonic``): far longer than
any call takes on mongomock, so that no outcome depends on the machine's speed; the
simulator retries failed calls in virtual time."""


def batch_token(claim: Claim) -> str:
    """The token a claim stored in its document: its batch's (a claim's own token is the
    batch's and its place in the batch, ``<batch>-<n>``)."""
    return claim.token.partition("-")[0]


@dataclass(frozen=True, slots=True)
class Before:
    """What the simulator noted as a claim began: its sequence number, the reference time
    (its lease counts from then: the claim compares with the node's now of that moment),
    and ``claims``: id -> (token, lease_until) of the live claims it might take."""

    seq: int
    now: float
    claims: dict[Any, tuple[Any, Any]]


BeforeTake = Callable[["SimNode"], Before]
TakeObserver = Callable[["SimNode", list[Claim], Before], None]
ClaimsObserver = Callable[["SimNode", Sequence[Claim]], None]


class SimNode:
    """A node: its scheduler, clock, collection view and what the simulator knows of it."""

    def __init__(
        self,
        index: int,
        seed: int,
        raw: Any,
        reference: ReferenceClock,
        faults: StoreFaults,
        *,
        lease: float,
        poll: float,
        batch: int,
        before_take: BeforeTake,
        on_take: TakeObserver,
        on_settled: ClaimsObserver,
        on_renewed: ClaimsObserver,
    ) -> None:
        self.index = index
        self.name = f"n{index}"
        self.clock = NodeClock(reference)
        self.dead = False
        self.busy = False  # inside run_due: its next sweep waits
        self.paused_until = 0.0
        self.starved_until = 0.0
        self.dies_at: float | None = None
        self.kill_pending = False
        self.pause_pending: float | None = None
        self.renewing = False
        self.held: list[Claim] = []  # won and not settled (the ones the driver renews)
        self.records: list[Any] = []  # the claims of the sweep running now
        self.lease = timedelta(seconds=lease)
        self.collection = FaultyCollection(raw, self.name, reference, faults, lambda: self.dead)
        self.scheduler = MongoScheduler(
            self.collection,  # type: ignore[arg-type]  # a pymongo Collection's stand-in
            node_id=self.name,
            clock=self.clock,
            poll_interval=timedelta(seconds=poll),
            lease=self.lease,
            batch_size=batch,
            workers=1,  # one stack: one handler of a node at a time (see the module)
            op_timeout=OP_TIMEOUT,
            push_wakeup=False,
            redelivery=REDELIVERY,
        )
        # Never started (the simulator drives run_due): no start-watch thread, which would
        # read the collection in real time, beside the simulation.
        self.scheduler._start_watch.stop()
        # A port write whose reply was lost raises OutcomeUnknown at once, not after waiting
        # for its deadline in real time: the simulated database applies a write at once or
        # never, so none can still be on its way (and no run may depend on real time).
        self.scheduler._fence._unfenced = lambda began: 0.0  # type: ignore[method-assign]
        store = cast(MongoTimerStore, self.scheduler.store)
        # Seam 1: generations drawn from the seed, so a replay stores the same ones.
        store.steps.rng.seed(f"{seed}:{self.name}")
        # Seam 2: see what each claim won, before any handler runs.
        for name in ("claim_started", "claim_due"):
            real_claim = getattr(store, name)

            def claim(
                routes: Collection[str],
                owner: str,
                lease: timedelta,
                limit: int,
                real: Callable[..., list[Claim]] = real_claim,
            ) -> list[Claim]:
                before = before_take(self)
                won = real(routes, owner, lease, limit)
                self.held += won
                on_take(self, won, before)
                return won

            setattr(store, name, claim)
        # Seam 3: which claims were settled (they hold nothing since), which leases moved.
        real_settle, real_renew = store.settle, store.renew

        def settle(settlements: Sequence[Settlement]) -> list[SettleResult]:
            results = real_settle(settlements)
            done = [s.claim for s in settlements]
            self.held = [c for c in self.held if not any(_same(c, d) for d in done)]
            on_settled(self, done)
            return results

        def renew(claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
            try:
                return real_renew(claims, lease)
            finally:
                on_renewed(self, claims)

        store.settle = settle  # type: ignore[method-assign]
        store.renew = renew  # type: ignore[method-assign]

    def renew(self) -> int:
        """Renew the leases of the claims this node holds (what the thread driver's loop
        does while a handler runs: ``run_due`` renews nothing meanwhile): those its core
        still holds - queued, starting, running or owed a settle (a queued claim whose
        renewal it saw refused is dropped, and must lapse)."""
        core = self.scheduler._core
        holds = {(c.item.id, c.token) for c in (*core.queue, *core.running.values())}
        holds |= {(c.item.id, c.token) for _, c in core.starting}
        holds |= {(s.claim.item.id, s.claim.token) for s in core.pending}
        self.held = [c for c in self.held if (c.item.id, c.token) in holds]
        renewed = self.scheduler.store.renew(self.held, self.lease)
        fresh = {(c.item.id, c.token): c for c in renewed}
        self.held = [fresh.get((c.item.id, c.token), c) for c in self.held]
        return len(renewed)

    def available(self, now: float) -> bool:
        """Whether the node can take a client call now (alive, not paused)."""
        return not self.dead and self.paused_until <= now


def _same(one: Claim, other: Claim) -> bool:
    return one.item.id == other.item.id and one.token == other.token
