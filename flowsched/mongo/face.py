"""Internal: what both MongoDB scheduler faces (:class:`~flowsched.MongoScheduler` and
:class:`~flowsched.AsyncMongoScheduler`) add to their node scheduler, written once: the
store's arguments from theirs, the collection, the change-stream wake-up's filter and what it
wakes, and the start watch's question.

Both faces are the node core (:mod:`flowsched.node.core`) over a MongoDB timer store
(:class:`~flowsched.mongo.MongoTimerStore`, :class:`~flowsched.mongo.AsyncMongoTimerStore`),
as ``PostgresScheduler`` is over its table: everything a node decides is the core's; the
faces only build the store, start the change-stream reader and the heartbeats, and close
what they opened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from flowsched.clock import Clock, ManualClock, SystemClock
from flowsched.history import HistoryPolicy
from flowsched.mongo.arguments import check_arguments
from flowsched.mongo.timer_ops import MongoStoreArgs
from flowsched.node.common import NodeArgs, default_node_id

if TYPE_CHECKING:
    from flowsched.calendar import Calendar
    from flowsched.delivery import DeliveryCore, Observer
    from flowsched.node.core import NodeCore
    from flowsched.redelivery import RedeliveryPolicy

__all__ = ["MongoFace", "face_arguments"]


def face_arguments(
    *,
    node_id: str | None,
    poll_interval: timedelta,
    clock: Clock | None,
    redelivery: RedeliveryPolicy | None,
    observer: Observer | None,
    batch_size: int,
    lease: timedelta,
    workers: int,
    op_timeout: timedelta,
    buckets: int,
    serve_buckets: Iterable[int] | None,
    server_time: bool | None,
    max_clock_skew: timedelta,
    shutdown_timeout: timedelta,
    history: HistoryPolicy | None,
) -> tuple[MongoStoreArgs, NodeArgs]:
    """The store's and the node scheduler's arguments for a face built with these (checked
    first, each error naming its argument).

    Time: by default the database's, measured (``server_time=None`` or ``True``) on
    ``clock`` (default the host's), except on a :class:`~flowsched.ManualClock`, which is
    trusted as it is (as with ``server_time=False``, any clock)."""
    served = check_arguments(
        poll_interval, lease, op_timeout, batch_size, workers, buckets, serve_buckets
    )
    measure = not isinstance(clock, ManualClock) if server_time is None else server_time
    owner = node_id or default_node_id()
    kept = history or HistoryPolicy()
    store = MongoStoreArgs(
        clock=None if measure else (clock or SystemClock()),
        node_clock=clock if measure else None,
        history_limit=kept.limit,
        history_retention=kept.retention,
        buckets=buckets,
        serve_buckets=served,
        node=owner,
        op_timeout=op_timeout,
        max_clock_skew=max_clock_skew,
    )
    node = NodeArgs(
        # A measured store's time counts due times (face_clock); a clock given to be
        # trusted (or stepped by hand) is the node's own.
        clock=clock if not measure or isinstance(clock, ManualClock) else None,
        redelivery=redelivery,
        observer=observer,
        node_id=owner,
        workers=workers,
        batch_size=batch_size,
        lease=lease,
        poll_interval=poll_interval,
        shutdown_timeout=shutdown_timeout,
    )
    return store, node


class MongoFace:
    """What both faces add to their node scheduler (but for how they start and stop)."""

    calendars: Mapping[str, Calendar]
    _delivery: DeliveryCore
    _core: NodeCore
    _mongo: Any  # the MongoTimerStore or AsyncMongoTimerStore
    _owned_client: Any = None
    """The client ``from_config`` created, closed with the scheduler (``None``: the
    collection's client belongs to the caller)."""

    @property
    def collection(self) -> Any:
        """The items collection (its ``database`` holds the ``_dead`` ones and yours)."""
        return self._mongo.collection

    def _wanted(self, document: Mapping[str, Any]) -> bool:
        """Whether this node claims the item of a (projected) change-stream document: its
        bucket is served and its route has a handler here."""
        if document.get("bucket", 0) not in self._mongo.steps.roles.served:
            return False
        return document.get("route") in self._delivery.routes()

    def _claiming(self) -> bool:
        """Whether a wake-up could start no claim now (:attr:`NodeCore.saturated`): the
        change-stream reader then leaves the stream unread (the claim on its way, or the
        next one, says what comes next). Read from the reader's thread: a few lengths read,
        a stale answer costs a read."""
        return self._core.saturated

    @staticmethod
    def _poke(
        wake: Callable[[], None], wake_at: Callable[[datetime], None]
    ) -> Callable[[datetime | None], None]:
        """The change-stream reader's callback: wake the driver by an item's ready time, or
        at once (``None``: events may have been missed)."""

        def poke(ready: datetime | None) -> None:
            if ready is None:
                wake()
            else:
                wake_at(ready)

        return poke

    def __repr__(self) -> str:
        name = self._mongo.collection.name
        return f"{type(self).__name__}({name!r}, node_id={getattr(self, 'node_id', '?')!r})"
