"""Internal: what the sync and async node schedulers share, written once: their settings,
the node id, the late-completion report, and the steering calls' arguments."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypedDict

from flowsched.clock import Clock
from flowsched.delivery import DeliveryCore
from flowsched.node.core import LateHook, NodeSettings
from flowsched.records import ScheduleItem, ScheduleKind, log_fields, not_an_item
from flowsched.steering import TimerState
from flowsched.store.records import Claim, TimerSelection

__all__ = [
    "NodeArgs",
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

    node_id: str | None
    workers: int
    batch_size: int
    lease: timedelta
    poll_interval: timedelta
    shutdown_timeout: timedelta


@dataclass(frozen=True, slots=True)
class NodeOptions:
    """The settings of a node scheduler (the ``MongoScheduler`` names where they apply)."""

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
        return NodeSettings(
            self.node_id or default_node_id(),
            workers=1 if manual else self.workers,
            batch_size=1 if manual else self.batch_size,
            lease=self.lease,
            poll_interval=self.poll_interval,
            start_on_claim=callable(getattr(store, "claim_started", None)),
        )


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
