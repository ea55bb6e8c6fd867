"""Nodes of the node core in virtual time: several :class:`~flowsched.node.core.NodeCore`
over one reference store, with slow and failing store calls, handlers that take time, and
clients that replace and cancel timers while claims wait in queues. One seed, one history.

The seeds vary what breaks promises at the seams: worker pools of 1 or 2 and handlers that
take up to most of a lease (busy workers, claims waiting in queues); store round trips that
are slow, refused, or lost after the store applied them (:class:`~flowsched.OutcomeUnknown`);
and each node's clock, off the store's by up to 5 minutes, measured through a
:class:`~flowsched.node.clock_filter.ClockFilter` over round trips that are slow, lost and
asymmetric (a node's requests may be held up to 3 s on the way, as by a proxy), and whose
wall clock steps now and then (up to a minute either way). A node
judges due times by the earliest the store's time can be and leases by the latest, as
``MongoTimerStore`` does (:class:`_NodeView`).

:func:`simulate_nodes` returns the broken invariants (empty: none):

* **no stale start** - a handler never runs a form after its cancel or replacement
  returned, unless the store recorded that run's start before (CONTRACT section 15);
* **never early** - no handler runs before its item's due time (by the store's clock);
* **no rerun after success** - a form whose handler returned is not run again (its outcome
  reaches the store before its lease ends, even through transient store failures), unless
  every settle and renewal its node sent from the handler's end until another claim took the
  form failed, and the node kept that outcome and sent it later (it could not reach the
  store in time: at least once, as any lease-based scheduler delivers then);
* **nothing lost** - at the end, once faults stop, every timer due has been delivered.

``plant`` runs a node core with a known bug, to show the invariants catch it:
``"no-confirm"`` (queued claims start without the check), ``"drop-settle"`` (a settle the
store refused is dropped), ``"midpoint-clock"`` (the clock estimate taken at the midpoint of
its round trip, with no error bound), ``"wall-clock"`` (the clock estimate carried on the
node's wall clock, so a step of it moves every judgement), ``"lease-fence"`` (the store
fences a claim on its remembered lease end, so a renewal whose reply was lost makes its
settle stale), ``"start-unrecorded"`` (with ``start=True``: a claim started as claimed whose
start the store does not record).

``start=True`` runs the nodes as over a store with ``claim_started`` (the core's
``start_on_claim``): each claim confirmed in the same call, by the latest the store's time
can be, as a claim and a check in one statement would be.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched.clock import ManualClock
from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.node.actions import (
    MAIN,
    Action,
    ClaimDue,
    ConfirmStart,
    SettleBatch,
    Sleep,
    StartHandler,
)
from flowsched.node.clock_filter import ClockFilter
from flowsched.node.core import NodeCore, NodeSettings, lane, store_call
from flowsched.outcomes import Completed, Outcome, Redeliver
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.store.memory import MemoryTimerStore
from flowsched.store.records import Claim, Settlement, SettleResult

__all__ = ["PLANTS", "simulate_nodes"]

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTE = "h:sim"
LEASE = timedelta(seconds=10)
Form = tuple[str, int]
_MS = timedelta(milliseconds=1)


class _NoConfirm(NodeCore):
    def succeeded(self, action: Action, result: object, now: datetime) -> None:
        if isinstance(action, ConfirmStart):
            result = list(action.claims)  # planted: every queued claim "still holds"
        super().succeeded(action, result, now)


class _DropSettle(NodeCore):
    def failed(self, action: Action, error: BaseException, now: datetime) -> None:
        if isinstance(action, SettleBatch):
            return  # planted: the refused batch is dropped
        super().failed(action, error, now)


class _LeaseFenceStore(MemoryTimerStore):
    """Planted: a claim also fenced by equality with the lease end the node remembers (its
    completions too: a stale one is not applied as a late completion)."""

    def _held(self, claim: Claim, now: datetime | None = None) -> Any:
        row = super()._held(claim, now)
        return row if row is not None and row.until == claim.lease_until else None

    def _settle(self, settlement: Settlement, now: datetime) -> SettleResult:
        if self._held(settlement.claim) is None:
            return SettleResult(settlement.claim, False)
        return super()._settle(settlement, now)


class _MidpointFilter(ClockFilter):
    """Planted: the server read its clock at the midpoint of the round trip, exactly."""

    def bound(self, monotonic: float, node_now: datetime) -> tuple[datetime, timedelta]:
        best = self.best(monotonic)
        if best is None:
            return node_now, timedelta(0)
        return best.estimate_at(monotonic), timedelta(0)


class _WallClockFilter(ClockFilter):
    """Planted: the offset measured against the wall clock, applied to the wall clock now."""

    def bound(self, monotonic: float, node_now: datetime) -> tuple[datetime, timedelta]:
        best = self.best(monotonic)
        if best is None:
            return node_now, timedelta(0)
        return node_now + best.offset, best.error_at(monotonic)


PLANTS: dict[str | None, type[NodeCore]] = {
    None: NodeCore,
    "no-confirm": _NoConfirm,
    "drop-settle": _DropSettle,
    "midpoint-clock": NodeCore,  # the bug is in the node's clock filter (_MidpointFilter)
    "wall-clock": NodeCore,  # the bug is in the node's clock filter (_WallClockFilter)
    "lease-fence": NodeCore,  # the bug is in the store (_LeaseFenceStore)
    "start-unrecorded": NodeCore,  # the bug is in the store's claim_started (_NodeView)
}


_FILTERS: dict[str | None, type[ClockFilter]] = {
    "midpoint-clock": _MidpointFilter,
    "wall-clock": _WallClockFilter,
}


class _At:
    """A clock that reads one instant (the store's time as a node judges it, for one call)."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


class _NodeView:
    """One node's view of the shared store: each call judged by the node's estimate of the
    store's time - due by the earliest it can be, a lease's end by the latest - as a store
    that compares times measured on the node (``MongoTimerStore``) does."""

    def __init__(self, store: MemoryTimerStore, node: _Node, unrecorded: bool = False) -> None:
        self.store = store
        self.node = node
        self.unrecorded = unrecorded  # planted: claim_started records no start

    def _at(self, at: datetime) -> MemoryTimerStore:
        self.store.clock = _At(at)  # type: ignore[assignment]
        return self.store

    def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        return self._at(self.node.earliest()).claim_due(routes, owner, lease, limit)

    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        return self._at(self.node.latest()).confirm_start(claims)

    def claim_started(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        claims = self.claim_due(routes, owner, lease, limit)
        return claims if self.unrecorded else self.confirm_start(claims)

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        return self._at(self.node.earliest()).renew(claims, lease)

    def release(self, claims: Sequence[Claim]) -> int:
        return self._at(self.node.estimate()).release(claims)

    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        return self._at(self.node.estimate()).settle(settlements)

    def next_due(self, routes: Collection[str], after: datetime | None = None) -> datetime | None:
        return self._at(self.node.estimate()).next_due(routes, after)


@dataclass
class _Node:
    core: NodeCore
    truth: ManualClock
    skew: timedelta  # the node's wall clock minus the store's
    hold: float  # seconds a proxy holds each request on its way to the store
    filter: ClockFilter
    calls: list[tuple[Action, object, BaseException | None, datetime]] = field(
        default_factory=list
    )  # store calls in flight: at most one per lane of the core, answered in any order
    measuring: tuple[float, datetime, datetime | None, datetime] | None = None
    measured_at: datetime | None = None
    running: dict[int, tuple[Claim, datetime]] = field(default_factory=dict)
    sent: list[tuple[datetime, bool]] = field(default_factory=list)  # settles, renewals: applied?
    settled: dict[tuple[Form, str], datetime] = field(default_factory=dict)  # a claim's settle

    def wall(self) -> datetime:
        return self.truth.now() + self.skew

    def estimate(self) -> datetime:
        return self.filter.estimate(_seconds(self.truth.now()), self.wall())

    def earliest(self) -> datetime:
        return self.filter.earliest(_seconds(self.truth.now()), self.wall())

    def latest(self) -> datetime:
        return self.filter.latest(_seconds(self.truth.now()), self.wall())


def _seconds(at: datetime) -> float:
    """A node's monotonic clock: seconds of true time (a wall clock's skew never reaches it)."""
    return (at - START).total_seconds()


class _World:
    def __init__(self, seed: int, nodes: int, plant: str | None, start: bool = False) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock(START)
        store = _LeaseFenceStore if plant == "lease-fence" else MemoryTimerStore
        self.store = store(self.clock)
        self.seq = 0
        self.removed: dict[Form, int] = {}  # form -> seq its cancel/replace returned
        self.starts: dict[Form, list[int]] = {}  # form -> seqs of recorded starts
        self.succeeded: dict[Form, tuple[_Node, datetime, str]] = {}  # node, end, claim token
        self.claimed: dict[tuple[Form, str], datetime] = {}  # a claim (by token): when taken
        self.reruns: list[tuple[Form, Claim]] = []  # judged at the end (_cut_off)
        self.broken: list[str] = []
        self.faults = True
        self.longest = self.rng.choice((1000, 3000, 7000))  # ms: how long a handler may take
        core = PLANTS[plant]
        rng = self.rng
        self.nodes = [
            _Node(
                core(
                    NodeSettings(
                        f"n{i}",
                        workers=rng.randint(1, 2),
                        batch_size=rng.randint(1, 4),
                        lease=LEASE,
                        poll_interval=timedelta(seconds=1),
                        start_on_claim=start,
                    ),
                    lambda: frozenset({ROUTE}),
                ),
                self.clock,
                timedelta(milliseconds=rng.choice((0, 0, rng.randint(-300_000, 300_000)))),
                rng.choice((0.0, 0.0, rng.uniform(1.0, 3.0))),
                _FILTERS.get(plant, ClockFilter)(),
            )
            for i in range(nodes)
        ]
        unrecorded = plant == "start-unrecorded"
        self.views = [_NodeView(self.store, node, unrecorded) for node in self.nodes]

    def step_clock(self) -> None:
        """A node's wall clock steps (NTP, an operator): its monotonic clock does not."""
        node = self.rng.choice(self.nodes)
        node.skew += timedelta(milliseconds=self.rng.randint(-60_000, 60_000))

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    def client(self, timers: int) -> None:
        self.store.clock = self.clock
        item_id = f"t{self.rng.randrange(timers)}"
        old = self.store.get(item_id)
        if self.rng.random() < 0.3:
            if self.store.remove(item_id) and old is not None:
                self.removed[(item_id, old.generation)] = self.tick()
            return
        due = self.clock.now() + timedelta(milliseconds=self.rng.randrange(0, 4000))
        self.store.put(ScheduleItem(item_id, ScheduleKind.TIMER, due, handler="sim"))
        if old is not None:
            self.removed[(item_id, old.generation)] = self.tick()

    def measure(self, node: _Node) -> bool:
        """Measure the store's clock now and then (slow, held, lost round trips); whether
        the node has a sample to judge time by."""
        now = self.clock.now()
        if node.measuring is not None:
            sent, wall, server, reply_at = node.measuring
            if reply_at <= now:
                node.measuring = None
                node.measured_at = now
                if server is not None:
                    node.filter.add(sent, _seconds(reply_at), wall, server)
        elif node.measured_at is None or now - node.measured_at >= timedelta(seconds=2):
            way = node.hold + self.rng.uniform(0.0, 0.05)  # a proxy holds every request
            back = self.rng.uniform(0.0, 0.05)
            if self.rng.random() < 0.1:
                back += self.rng.uniform(0.0, 2.0)  # a slow reply
            arrives = now + timedelta(seconds=way)
            lost = self.faults and self.rng.random() < 0.1
            server = None if lost else arrives - timedelta(microseconds=arrives.microsecond % 1000)
            node.measuring = (_seconds(now), node.wall(), server, arrives + timedelta(seconds=back))
        return bool(node.filter.samples)

    def step(self, index: int) -> None:
        node = self.nodes[index]
        if not self.measure(node):
            return
        now = node.estimate()  # the core works in the store's time, as the node sees it
        true_now = self.clock.now()
        for ticket, (claim, ends) in list(node.running.items()):
            if ends <= true_now:
                del node.running[ticket]
                node.core.finished(ticket, self._outcome(node, claim, true_now))
        answered = sorted((c for c in node.calls if c[3] <= true_now), key=lambda c: c[3])
        node.calls = [c for c in node.calls if c[3] > true_now]
        for action, result, error, _ in answered:
            if error is not None:
                node.core.failed(action, error, now)
            else:
                node.core.succeeded(action, result, now)
        for _ in range(20):
            action = node.core.next_action(now)
            if isinstance(action, Sleep):
                return
            if isinstance(action, StartHandler):
                self._start(node, action, true_now)
                continue
            self._send(index, action, true_now)

    def _send(self, index: int, action: Action, now: datetime) -> None:
        node = self.nodes[index]
        reply_at = now + timedelta(milliseconds=self.rng.randrange(0, 1500))
        fault = self.rng.random() if self.faults else 1.0
        if lane(action) == MAIN:
            node.sent.append((now, fault >= 0.08))
        if fault < 0.08:
            error = SchedulerUnavailable("simulated outage: nothing applied")
            node.calls.append((action, None, error, reply_at))
            return
        result = store_call(action, self.views[index], node.core.settings, frozenset({ROUTE}))
        self.store.clock = self.clock
        if isinstance(action, ClaimDue):
            for claim in result:
                self.claimed[((claim.item.id, claim.generation), claim.token)] = now
        if isinstance(action, SettleBatch):
            for settled in action.settlements:
                claim = settled.claim
                node.settled[((claim.item.id, claim.generation), claim.token)] = now
        started = isinstance(action, ClaimDue) and action.start and not self.views[index].unrecorded
        if isinstance(action, ConfirmStart) or started:
            for claim in result:
                self.starts.setdefault((claim.item.id, claim.generation), []).append(self.tick())
        if fault < 0.12:
            # Applied, but the reply was lost: the caller gives up. A lost renewal leaves
            # the node with the old lease end; its claim still holds (fenced by identity).
            reply_at += timedelta(seconds=self.rng.uniform(1.0, 3.0))
            node.calls.append((action, None, OutcomeUnknown("simulated: reply lost"), reply_at))
            return
        node.calls.append((action, result, None, reply_at))

    def _start(self, node: _Node, action: StartHandler, now: datetime) -> None:
        claim = action.claim
        form = (claim.item.id, claim.generation)
        removed = self.removed.get(form)
        if removed is not None and not any(s < removed for s in self.starts.get(form, ())):
            self.broken.append(f"stale start: {form} ran after its cancel/replace returned")
        if now < claim.item.due:
            self.broken.append(f"early: {form} ran at {now}, due {claim.item.due}")
        if form in self.succeeded:
            self.reruns.append((form, claim))
        ends = now + timedelta(milliseconds=self.rng.randrange(0, self.longest))
        node.running[action.ticket] = (claim, ends)

    def _cut_off(self, form: Form, claim: Claim) -> bool:
        """Whether the node whose handler of ``form`` returned had every settle and renewal
        fail until ``claim`` took the form again, and kept the outcome: its settle applied
        later (stale by then)."""
        node, ended, token = self.succeeded[form]
        taken = self.claimed.get((form, claim.token), ended)
        failed = not any(applied for at, applied in node.sent if ended <= at < taken)
        return failed and node.settled.get((form, token), ended) >= taken

    def _outcome(self, node: _Node, claim: Claim, now: datetime) -> Outcome:
        if self.faults and self.rng.random() < 0.15:
            return Redeliver(now + timedelta(seconds=1), claim.attempt + 1, "E: simulated")
        self.succeeded.setdefault((claim.item.id, claim.generation), (node, now, claim.token))
        return Completed()


def simulate_nodes(
    seed: int,
    *,
    nodes: int = 3,
    timers: int = 6,
    steps: int = 400,
    plant: str | None = None,
    start: bool = False,
) -> list[str]:
    """Run ``steps`` virtual ticks from ``seed``; the invariants broken (see the module)."""
    if plant not in PLANTS:
        raise ValueError(f"plant {plant!r} is not one of {sorted(map(str, PLANTS))}")
    world = _World(seed, nodes, plant, start)
    order: deque[int] = deque(range(len(world.nodes)))
    for _ in range(steps):
        if world.rng.random() < 0.3:
            world.client(timers)
        if world.rng.random() < 0.02:
            world.step_clock()
        order.rotate(world.rng.randrange(len(order)))
        for index in order:
            world.step(index)
        world.clock.jump(timedelta(milliseconds=world.rng.randrange(0, 400)))
    world.faults = False
    for _ in range(600):  # a minute of calm: every due timer is delivered
        for index in range(len(world.nodes)):
            world.step(index)
        world.clock.jump(timedelta(milliseconds=100))
    for form, claim in world.reruns:
        if not world._cut_off(form, claim):
            world.broken.append(f"rerun: {form} ran again after its handler returned")
    world.store.clock = world.clock
    now = world.clock.now()
    for item_id in (f"t{n}" for n in range(timers)):
        item = world.store.get(item_id)
        if item is not None and item.due <= now - timedelta(seconds=30):
            world.broken.append(f"lost: {item_id} due {item.due} never delivered")
    return world.broken
