"""Nodes of the node core in virtual time: several :class:`~flowsched.node.core.NodeCore`
over one reference store, with slow and failing store calls, handlers that take time, and
clients that replace and cancel timers while claims wait in queues. One seed, one history.

:func:`simulate_nodes` returns the broken invariants (empty: none):

* **no stale start** - a handler never runs a form after its cancel or replacement
  returned, unless the store recorded that run's start before (CONTRACT section 15);
* **never early** - no handler runs before its item's due time (by the store's clock);
* **no rerun after success** - a form whose handler returned is not run again (its outcome
  reaches the store before its lease ends, even through transient store failures);
* **nothing lost** - at the end, once faults stop, every timer due has been delivered.

``plant`` runs a node core with a known bug, to show the invariants catch it:
``"no-confirm"`` (queued claims start without the check), ``"drop-settle"`` (a settle the
store refused is dropped).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from flowsched.clock import ManualClock
from flowsched.errors import SchedulerUnavailable
from flowsched.node.actions import Action, ConfirmStart, SettleBatch, Sleep, StartHandler
from flowsched.node.core import NodeCore, NodeSettings, store_call
from flowsched.outcomes import Completed, Outcome, Redeliver
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.store.memory import MemoryTimerStore
from flowsched.store.records import Claim

__all__ = ["PLANTS", "simulate_nodes"]

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTE = "h:sim"
Form = tuple[str, int]


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


PLANTS: dict[str | None, type[NodeCore]] = {
    None: NodeCore,
    "no-confirm": _NoConfirm,
    "drop-settle": _DropSettle,
}


@dataclass
class _Node:
    core: NodeCore
    call: tuple[Action, object, BaseException | None, datetime] | None = None
    running: dict[int, tuple[Claim, datetime]] = field(default_factory=dict)


class _World:
    def __init__(self, seed: int, nodes: int, plant: str | None) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock(START)
        self.store = MemoryTimerStore(self.clock)
        self.seq = 0
        self.removed: dict[Form, int] = {}  # form -> seq its cancel/replace returned
        self.starts: dict[Form, list[int]] = {}  # form -> seqs of recorded starts
        self.succeeded: set[Form] = set()
        self.broken: list[str] = []
        self.faults = True
        core = PLANTS[plant]
        self.nodes = [
            _Node(
                core(
                    NodeSettings(
                        f"n{i}",
                        workers=self.rng.randint(1, 2),
                        batch_size=self.rng.randint(1, 4),
                        lease=timedelta(seconds=10),
                        poll_interval=timedelta(seconds=1),
                    ),
                    lambda: frozenset({ROUTE}),
                )
            )
            for i in range(nodes)
        ]

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    def client(self, timers: int) -> None:
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

    def step(self, node: _Node) -> None:
        now = self.clock.now()
        for ticket, (claim, ends) in list(node.running.items()):
            if ends <= now:
                del node.running[ticket]
                node.core.finished(ticket, self._outcome(claim, now))
        if node.call is not None:
            action, result, error, reply_at = node.call
            if reply_at > now:
                return
            node.call = None
            if error is not None:
                node.core.failed(action, error, now)
            else:
                node.core.succeeded(action, result, now)
        for _ in range(20):
            action = node.core.next_action(now)
            if isinstance(action, Sleep):
                return
            if isinstance(action, StartHandler):
                self._start(node, action, now)
                continue
            self._send(node, action, now)
            return

    def _send(self, node: _Node, action: Action, now: datetime) -> None:
        reply_at = now + timedelta(milliseconds=self.rng.randrange(0, 1500))
        if self.faults and self.rng.random() < 0.1:
            error = SchedulerUnavailable("simulated outage: nothing applied")
            node.call = (action, None, error, reply_at)
            return
        result = store_call(action, self.store, node.core.settings, frozenset({ROUTE}))
        if isinstance(action, ConfirmStart):
            for claim in result:
                self.starts.setdefault((claim.item.id, claim.generation), []).append(self.tick())
        node.call = (action, result, None, reply_at)

    def _start(self, node: _Node, action: StartHandler, now: datetime) -> None:
        claim = action.claim
        form = (claim.item.id, claim.generation)
        seq = self.tick()
        removed = self.removed.get(form)
        if removed is not None and not any(s < removed for s in self.starts.get(form, ())):
            self.broken.append(f"stale start: {form} ran after its cancel/replace returned")
        if now < claim.item.due:
            self.broken.append(f"early: {form} ran at {now}, due {claim.item.due}")
        if form in self.succeeded:
            self.broken.append(f"rerun: {form} ran again after its handler returned")
        del seq
        ends = now + timedelta(milliseconds=self.rng.randrange(0, 3000))
        node.running[action.ticket] = (claim, ends)

    def _outcome(self, claim: Claim, now: datetime) -> Outcome:
        if self.faults and self.rng.random() < 0.15:
            return Redeliver(now + timedelta(seconds=1), claim.attempt + 1, "E: simulated")
        self.succeeded.add((claim.item.id, claim.generation))
        return Completed()


def simulate_nodes(
    seed: int,
    *,
    nodes: int = 3,
    timers: int = 6,
    steps: int = 400,
    plant: str | None = None,
) -> list[str]:
    """Run ``steps`` virtual ticks from ``seed``; the invariants broken (see the module)."""
    if plant not in PLANTS:
        raise ValueError(f"plant {plant!r} is not one of {sorted(map(str, PLANTS))}")
    world = _World(seed, nodes, plant)
    order: deque[_Node] = deque(world.nodes)
    for _ in range(steps):
        if world.rng.random() < 0.3:
            world.client(timers)
        order.rotate(world.rng.randrange(len(order)))
        for node in order:
            world.step(node)
        world.clock.jump(timedelta(milliseconds=world.rng.randrange(0, 400)))
    world.faults = False
    for _ in range(600):  # a minute of calm: every due timer is delivered
        for node in world.nodes:
            world.step(node)
        world.clock.jump(timedelta(milliseconds=100))
    now = world.clock.now()
    for item_id in (f"t{n}" for n in range(timers)):
        item = world.store.get(item_id)
        if item is not None and item.due <= now - timedelta(seconds=30):
            world.broken.append(f"lost: {item_id} due {item.due} never delivered")
    return world.broken
