"""Internal: what both MongoDB scheduler faces (:class:`~flowsched.MongoScheduler` and
:class:`~flowsched.AsyncMongoScheduler`) assemble the same way - the node's default id, the
store with its claims and attempt history wired to the delivery core, and the routing test
a change-stream document passes before it wakes the node.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from flowsched.delivery import DeliveryCore
from flowsched.history import HistoryPolicy
from flowsched.mongo.claims import Claims
from flowsched.mongo.history import MongoHistory
from flowsched.mongo.server_clock import ServerClock
from flowsched.mongo.store import TimerStore

__all__ = ["StoreParts", "default_node_id", "handles", "store_parts"]


def default_node_id() -> str:
    """``<host>:<pid>:<6 hex>``: unique per scheduler, readable in logs and ``<name>_nodes``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class StoreParts(NamedTuple):
    """A node's hold on its collection: the store, the claims it makes there, and the attempt
    history that both the claims and the delivery core write to."""

    store: TimerStore
    claims: Claims
    history: MongoHistory


def store_parts(
    collection: Any,
    buckets: int,
    served: Sequence[int] | None,
    node_id: str,
    time: ServerClock,
    lease: timedelta,
    history: HistoryPolicy | None,
    core: DeliveryCore,
) -> StoreParts:
    """The store on ``collection`` (judged by ``time``), claims with leases of ``lease``, and
    the history kept by ``history``, set as ``core``'s journal and the claims' history."""
    store = TimerStore(collection, buckets, served, node=node_id, clock=time)
    claims = Claims(store, node_id, lease)
    journal = MongoHistory(time.now, node_id, history)
    core.journal = claims.history = journal
    store.keep_started = journal.kept  # a cancel or replace keeps a started attempt
    return StoreParts(store, claims, journal)


def handles(store: TimerStore, core: DeliveryCore, document: Mapping[str, Any]) -> bool:
    """Whether the node of ``store`` and ``core`` claims the item of a (projected) document:
    its bucket is served and its route has a handler here."""
    if document.get("bucket", 0) not in store.served:
        return False
    return document.get("route") in core.routes()
