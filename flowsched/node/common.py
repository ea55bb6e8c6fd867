"""Internal: what the sync and async node schedulers share, written once: their settings,
how they are wired (:class:`NodeFace`), the node id, the late-completion report, and the
steering calls' arguments."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypedDict, TypeVar

from flowsched.clock import Clock, SystemClock
from flowsched.delivery import DeliveryCore, Observer
from flowsched.node.core import NodeCore
from flowsched.node.gather import PACE
from flowsched.node.lost import lost_slot
from flowsched.node.settings import LateHook, NodeSettings
from flowsched.node.store_time import DatabaseTime, face_clock
from flowsched.node.write_fence import WriteFence
from flowsched.records import ScheduleItem, ScheduleKind, log_fields, not_an_item
from flowsched.redelivery import RedeliveryPolicy
from flowsched.steering import TimerState
from flowsched.store.measured_clock import MeasuredClock
from flowsched.store.records import Claim, TimerSelection

__all__ = [
    "NodeArgs",
    "NodeFace",
    "NodeOptions",
    "default_node_id",
    "is_manual",
    "late_hook",
    "selection",
    "stored_item",
]

log = logging.getLogger("flowsched.node")


def default_node_id() -> str:
    """``host:pid:random``: unique per process, readable in logs and ``timers()``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class NodeArgs(TypedDict, total=False):
    """The keyword settings a node scheduler takes (see :class:`NodeOptions`)."""

    clock: Clock | None
    redelivery: RedeliveryPolicy | None
    observer: Observer | None
    node_id: str | None
    workers: int
    batch_size: int
    lease: timedelta
    poll_interval: timedelta
    shutdown_timeout: timedelta


@dataclass(frozen=True, slots=True)
class NodeOptions:
    """The settings of a node scheduler (the ``MongoScheduler`` names where they apply)."""

    clock: Clock | None = None
    redelivery: RedeliveryPolicy | None = None
    observer: Observer | None = None
    node_id: str | None = None
    workers: int = 8
    batch_size: int = 100
    lease: timedelta = timedelta(seconds=30)
    poll_interval: timedelta = timedelta(seconds=1)
    shutdown_timeout: timedelta = timedelta(seconds=30)

    def settings(self, manual: bool, store: object = None) -> NodeSettings:
        """The core's settings; on a manual clock one claim at a time, delivered inline,
        so that items run in due order with the clock at their due time. A ``store`` that
        claims and starts in one call (``claim_started``) is used so (``start_on_claim``)."""
        workers, batch_size = (1, 1) if manual else (self.workers, self.batch_size)
        start_on_claim = starts_on_claim(store, workers, batch_size)
        return NodeSettings(
            self.node_id or default_node_id(),
            workers=workers,
            batch_size=batch_size,
            lease=self.lease,
            poll_interval=self.poll_interval,
            start_on_claim=start_on_claim,
            pace=PACE if start_on_claim and not manual else timedelta(0),
        )


def starts_on_claim(store: object, workers: int, batch_size: int) -> bool:
    """Whether a node over ``store`` starts its claims as it claims them (a store with
    ``claim_started``) rather than queueing a batch and confirming each wave: whichever
    costs fewer round trips. Starting on claim costs one claim (``claim_round_trips`` of the
    store, 1 unless it says) per wave of at most ``workers``; queueing, one claim per
    ``batch_size`` and one confirm per wave. So a MongoDB node (2: a ``find`` and an
    ``update_many``) with 8 threads and batches of 100 queues (about 0.15 round trips per
    timer against 0.25); its asyncio face, 100 slots, and PostgreSQL (1) start on claim."""
    if not callable(getattr(store, "claim_started", None)):
        return False
    cost = getattr(store, "claim_round_trips", 1)
    cost = cost if isinstance(cost, int) else 1  # a proxy forwarding every attribute
    return batch_size * (cost - 1) <= cost * workers


def is_manual(clock: Clock) -> bool:
    """Whether ``clock`` is stepped by hand (it has ``attach``: a ManualClock)."""
    return callable(getattr(clock, "attach", None))


def late_hook(delivery: DeliveryCore) -> LateHook:
    """The core's ``on_late``: tell the observer how long after its lease a claim settled."""

    def on_late(claim: Claim, late: timedelta) -> None:
        log.warning(
            "%s completed %.3fs after its lease ended (another node may have run it too)",
            claim.item.key,
            late.total_seconds(),
            extra=log_fields(claim.item),
        )
        delivery._notify(delivery.observer.late_completion, claim.item, claim.attempt, late)

    return on_late


def stored_item(item: object) -> ScheduleItem:
    """``item`` if it is a :class:`ScheduleItem`, else the port's ``TypeError``."""
    if not isinstance(item, ScheduleItem):
        not_an_item(item)
    return item


def selection(
    *,
    id_prefix: str | None = None,
    flow_id: str | None = None,
    kind: ScheduleKind | None = None,
    handler: str | None = None,
    state: TimerState | None = None,
    due_from: datetime | None = None,
    due_to: datetime | None = None,
    limit: int = 50,
    after: str | None = None,
) -> TimerSelection:
    """The :class:`TimerSelection` of ``timers(...)``'s keyword arguments."""
    return TimerSelection(id_prefix, flow_id, kind, handler, state, due_from, due_to, limit, after)


class Driver(Protocol):
    """What a face asks of its driver (its own calls differ by face)."""

    def start(self, name: str) -> None: ...

    def wake(self) -> None: ...

    def wake_at(self, when: datetime) -> None: ...


S = TypeVar("S")
D = TypeVar("D", bound=Driver)


class NodeFace(Generic[S, D]):
    """The wiring both node faces share: the clock, the store (an ``S``), the delivery
    core, the node core and its driver (a ``D``), built alike; ``repr``, ``now`` and how
    firing begins. A face adds only how it calls the store and waits."""

    _clock: Clock
    _time: Clock
    _store: S
    _delivery: DeliveryCore
    _manual: bool
    _core: NodeCore
    _driver: D
    _fence: WriteFence
    node_id: str

    settle_here = False  # a store with no I/O settles on the handler's thread/task
    _beats: Any = None  # the face's heartbeat (node/heartbeats.py) while started, if any

    def _wire(self, store: S, options: NodeArgs, driver: Any, run: Any, **delivery: Any) -> None:
        """Build the parts from ``options``: ``driver(core, store, run, routes, clock, ...)``
        makes the driver, ``delivery`` goes to :class:`DeliveryCore`."""
        opts = NodeOptions(**options)
        self._clock = opts.clock or SystemClock()  # waits, the driver's turns
        self._time = face_clock(store, opts.clock)  # due times: the store's time if measured
        self._store = store
        self._fence = WriteFence(store, self._clock)  # the deadline of the port's writes
        self._delivery = DeliveryCore(self._time, opts.redelivery, opts.observer, **delivery)
        self._manual = is_manual(self._clock)
        hook = late_hook(self._delivery)
        self._core = NodeCore(opts.settings(self._manual, store), self._delivery.routes, hook)
        self.node_id = self._core.settings.owner
        routes, clock, waits = self._delivery.routes, self._clock, opts.shutdown_timeout
        self._driver = driver(
            self._core,
            store,
            run,
            routes,
            clock,
            shutdown_timeout=waits,
            settle_here=self.settle_here,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store!r}, node={self.node_id!r})"

    @property
    def store(self) -> S:
        return self._store

    def now(self) -> datetime:
        return self._time.now()

    def _lost_slot(self, claim: Claim) -> ScheduleItem:
        """:func:`~flowsched.node.lost.lost_slot` by this node's time and lease."""
        return lost_slot(claim, self._time.now(), self._core.settings.lease)

    def _measuring(self) -> MeasuredClock | None:
        """The database time due times are counted from, if it should be measured before
        the next one: never measured, or not for 30 s (a node that fires keeps it fresh from
        its own store calls; a process that only schedules measures here, with ``now()``)."""
        time = self._time
        if isinstance(time, DatabaseTime) and time.measured.stale():
            return time.measured
        return None

    # -- what a port call does once the store has answered (the faces differ in the wait) --

    def _put_done(self, stored: ScheduleItem) -> ScheduleItem:
        """``stored`` is in the store: tell the observer, wake the driver by its due time."""
        self._delivery.scheduled(stored)
        self._driver.wake_at(stored.due)
        return stored

    def _remove_done(self, item_id: str, removed: bool) -> bool:
        """Tell the observer if ``item_id`` was removed; ``removed``."""
        if removed:
            self._delivery.cancelled(item_id)
        return removed

    def _remove_flow_done(self, removed: list[str]) -> int:
        """Tell the observer (if it listens) of each removed id; how many were removed."""
        if self._delivery.observes_cancelled:
            for item_id in removed:
                self._delivery.cancelled(item_id)
        return len(removed)

    def _requeue_done(self, item: ScheduleItem | None) -> bool:
        """Wake the driver by the due time of the requeued ``item``; whether there was one."""
        if item is None:
            return False
        self._driver.wake_at(item.due)
        return True

    def _resume_done(self, resumed: bool) -> bool:
        """Wake the driver if an item was resumed (it may be due); ``resumed``."""
        if resumed:
            self._driver.wake()
        return resumed

    def _routes_changed(self) -> None:
        """A handler was added: look for its items now, and advertise its route now (a
        heartbeat at once), not at the next beat; from any thread."""
        self._driver.wake()
        if self._beats is not None:
            self._beats.poke()

    def _begin_firing(self) -> None:
        """On a manual clock attach to it (steps deliver inline), else start the driver."""
        if self._manual:
            self._clock.attach(self)  # type: ignore[attr-defined]
        else:
            self._driver.start(f"flowsched-node-{self.node_id}")
