"""Internal: one simulated node — a real, never-started ``MongoScheduler`` on its own clock
and its own view of the shared collection, driven by the simulator's calls to ``run_due``.

The only module of the simulator that reaches inside the Mongo adapter, through three
narrow seams: the scheduler's RNG (seeded, so generations replay), its harvester's ``take``
(observed, to learn what each claim won and under which token), and its claims' ``renew``
(called on the simulator's schedule, as the sweeper's renewal would be). The claim, fence,
delivery and settle code that runs is the adapter's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flowsched.delivery import RedeliveryPolicy
from flowsched.mongo.claimed_batch import ClaimedBatch
from flowsched.mongo.scheduler import MongoScheduler
from flowsched.mongo.settlement import Claim
from flowsched.records import ScheduleKind
from flowsched.testing.simulation._world import (
    FaultyCollection,
    NodeClock,
    ReferenceClock,
    StoreFaults,
)

__all__ = ["KIND", "Before", "SimNode"]

KIND = ScheduleKind.TIMER
"""The kind every simulated timer has (one route, served by every node)."""

REDELIVERY = RedeliveryPolicy(initial=timedelta(seconds=1), maximum=timedelta(seconds=4))


@dataclass(frozen=True, slots=True)
class Before:
    """What the simulator noted as a claim began: its sequence number, the reference time
    (its lease counts from then: the claim compares with the node's now of that moment),
    and ``claims``: id -> (token, lease_until) of the live claims it might take."""

    seq: int
    now: float
    claims: dict[Any, tuple[Any, Any]]


BeforeTake = Callable[["SimNode"], Before]
TakeObserver = Callable[["SimNode", ClaimedBatch, Before], None]


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
        self.held: list[Claim] = []
        self.records: list[Any] = []  # the claims of the sweep running now
        self.collection = FaultyCollection(raw, self.name, reference, faults, lambda: self.dead)
        self.scheduler = MongoScheduler(
            self.collection,  # type: ignore[arg-type]  # a pymongo Collection's stand-in
            node_id=self.name,
            clock=self.clock,
            poll_interval=timedelta(seconds=poll),
            lease=timedelta(seconds=lease),
            batch_size=batch,
            # One try per call: the simulator retries in virtual time (within() would wait
            # in real time, and a real wait would make runs depend on the machine's speed).
            op_timeout=timedelta(microseconds=1),
            push_wakeup=False,
            redelivery=REDELIVERY,
        )
        # Seam 1: generations drawn from the seed, so a replay stores the same ones.
        self.scheduler._rng.seed(f"{seed}:{self.name}")
        # Never started (the simulator drives run_due): no start-watch thread, which would
        # read the collection in real time, beside the simulation.
        self.scheduler._start_watch.stop()
        # Seam 2: see what each claim won (the harvest), before any handler runs.
        harvester = self.scheduler._claimer
        real_take = harvester.take

        def take(
            limit: int, lookahead: timedelta = timedelta(0), *, mark: bool = False, start: int = 0
        ) -> ClaimedBatch:
            before = before_take(self)
            harvest = real_take(limit, lookahead, mark=mark, start=start)
            self.held = list(harvest.deliver)
            on_take(self, harvest, before)
            return harvest

        harvester.take = take  # type: ignore[method-assign]

    def renew(self) -> int:
        """Renew the leases of the claims this node holds (seam 3: what the sweeper's
        renewal does every third of the lease)."""
        pairs = [(claim.item.id, claim.token) for claim in self.held]
        # On the scheduler's clock (the database's time), as the sweeper renews.
        return self.scheduler._claims.renew(pairs, self.scheduler._time.now())

    def available(self, now: float) -> bool:
        """Whether the node can take a client call now (alive, not paused)."""
        return not self.dead and self.paused_until <= now
