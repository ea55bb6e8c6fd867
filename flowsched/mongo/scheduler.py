"""Internal: ``MongoScheduler``, durable timers in a MongoDB collection shared by nodes
(public as ``flowsched.MongoScheduler`` and ``flowsched.mongo.MongoScheduler``).

Thin by design, as ``PostgresScheduler``: the node core and its thread driver
(:class:`~flowsched.node.scheduler.NodeScheduler`) over a
:class:`~flowsched.mongo.MongoTimerStore`, plus a change-stream reader that wakes the node
when another node schedules an item due before its next poll, and its heartbeats in
``<name>_nodes``. Everything a node decides is the core's (CONTRACT section 15).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pymongo.collection import Collection

from flowsched.clock import Clock, ensure_utc
from flowsched.delivery import Observer
from flowsched.history import HistoryPolicy
from flowsched.mongo.change_stream import MAX_AWAIT, WakeUp
from flowsched.mongo.face import MongoFace, face_arguments
from flowsched.mongo.migration import warn_unrouted
from flowsched.mongo.server_clock import DEFAULT_MAX_SKEW
from flowsched.mongo.timer_store import MongoTimerStore
from flowsched.node.heartbeats import Beats
from flowsched.node.scheduler import NodeScheduler
from flowsched.records import ScheduleItem
from flowsched.redelivery import RedeliveryPolicy
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT
from flowsched.start_watch import StartWatch

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig

__all__ = ["MongoScheduler"]


class MongoScheduler(MongoFace, NodeScheduler):
    """Timers kept in a MongoDB collection: they survive the process, restarts and redeploys.

    Any number of schedulers (threads, processes, hosts) may share one collection: each due
    item is delivered to exactly one of them per attempt (a conditional claim with a lease),
    and an item whose claimer died is delivered again once its lease has run out. Delivery is
    at least once; handlers should be idempotent (``item.key`` is a good idempotency key).
    Once ``cancel`` returned True, or a replacing ``schedule`` returned, the old form never
    starts, on any node (a claim is confirmed with the database right before its handler
    runs); a delivery that had already started may finish, and ``history(item_id)`` shows it.

    ``collection`` is a pymongo ``Collection`` (or a mongomock one in tests); dead letters go
    to ``<name>_dead``, malformed documents to ``<name>_quarantine`` and the attempts to
    ``<name>_history`` beside it. It stays public as ``scheduler.collection``.

    Routing: a node claims only the items it can run - those addressed to a handler name it
    has registered, and those of a kind it has subscribed to. A started node advertises its
    routes in ``<name>_nodes`` (a heartbeat every poll; removed by ``close``).

    * ``poll_interval``: how often each node looks for due items when nothing wakes it;
      ``batch_size``: items claimed per round trip; ``workers``: handler threads.
    * ``lease``: how long a claim lasts without renewal (renewed while the handler runs);
      ``server_time``/``max_clock_skew``: due times and leases are judged by the database's
      clock, measured with its error bound (``server_time=False``: by ``clock``).
    * ``op_timeout``: how long a call waits before it raises
      :class:`~flowsched.SchedulerUnavailable` (:class:`~flowsched.OutcomeUnknown` for a write
      that may have applied; fenced by the database's time, it applies nothing later).
    * ``push_wakeup``: watch the collection with a change stream (replica sets and sharded
      clusters) so that an item another node schedules due before this node's next poll
      fires on time. Polling stays the source of truth.
    * ``buckets``/``serve_buckets``: the shard key's buckets (every node of a collection
      must agree on ``buckets``) and those this node claims from (default all).
    * ``shutdown_timeout``: how long ``close()`` waits for handlers in flight.

    With a :class:`~flowsched.clock.ManualClock` there is no background thread: once
    started, the scheduler delivers inside ``clock.advance(...)``, each item at its due
    time, like the in-memory adapter; :meth:`run_due` delivers what is due now.
    """

    async_class = "AsyncMongoScheduler"

    def __init__(
        self,
        collection: Collection[Any],
        node_id: str | None = None,
        poll_interval: timedelta = timedelta(seconds=1),
        clock: Clock | None = None,
        redelivery: RedeliveryPolicy | None = None,
        observer: Observer | None = None,
        batch_size: int = 100,
        lease: timedelta = timedelta(seconds=30),
        workers: int = 8,
        op_timeout: timedelta = timedelta(seconds=10),
        push_wakeup: bool = True,
        buckets: int = 1,
        serve_buckets: Iterable[int] | None = None,
        server_time: bool | None = None,
        max_clock_skew: timedelta = DEFAULT_MAX_SKEW,
        shutdown_timeout: timedelta = DEFAULT_SHUTDOWN_TIMEOUT,
        *,
        history: HistoryPolicy | None = None,
    ) -> None:
        store_args, node_args = face_arguments(
            node_id=node_id,
            poll_interval=poll_interval,
            clock=clock,
            redelivery=redelivery,
            observer=observer,
            batch_size=batch_size,
            lease=lease,
            workers=workers,
            op_timeout=op_timeout,
            buckets=buckets,
            serve_buckets=serve_buckets,
            server_time=server_time,
            max_clock_skew=max_clock_skew,
            shutdown_timeout=shutdown_timeout,
            history=history,
        )
        self._mongo = MongoTimerStore(collection, **store_args)
        super().__init__(self._mongo, **node_args)
        self._wakeup: WakeUp | None = None
        self._beats: Beats | None = None
        if not self._manual:
            self._beats = Beats(self._mongo, self.node_id, self._delivery.routes, poll_interval)
            if push_wakeup:
                poke = self._poke(self._driver.wake, self._driver.wake_at)
                wait = min(poll_interval, MAX_AWAIT)
                self._wakeup = WakeUp(
                    collection, poke, self._wanted, max_await=wait, paused=self._claiming
                )
        self._start_watch = StartWatch()

    @classmethod
    def from_config(
        cls,
        config: SchedulingConfig,
        *,
        node_id: str | None = None,
        clock: Clock | None = None,
        observer: Observer | None = None,
        client_factory: Callable[..., Any] | None = None,
        check: bool = False,
    ) -> MongoScheduler:
        """A scheduler on the collection ``ipf-scheduler.mongodb`` names, with the settings
        of ``ipf-scheduler.flowsched`` (see ``docs/reference/configuration.md``).

        With ``check=True`` the server is reached once (:meth:`ping`): a server that is down
        is a :class:`~flowsched.SchedulerUnavailable` here, not at the first ``schedule``.

        ``node_id`` wins over ``ipf-scheduler.flowsched.node-id``. The client is made by
        ``client_factory(uri, **options)`` (default ``pymongo.MongoClient``, tz-aware, with
        server-selection and connect timeouts of ``op-timeout``) and closed by :meth:`close`.
        A missing ``uri`` or database is a :class:`~flowsched.ConfigError` naming the key."""
        from flowsched.mongo.from_config import build

        return build(cls, config, node_id, clock, observer, client_factory, check)

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` (one upsert), replacing any item with its id, under a new generation.

        Returns the stored item: its ``due`` cut to whole milliseconds (BSON dates) and its
        new ``generation``. ``ValueError`` if the payload cannot be stored as BSON."""
        stored = super().schedule(item)
        if self.needs_start:
            self._start_watch.arm(self, self._core.settings.poll_interval)
        return stored

    @property
    def needs_start(self) -> bool:
        """Whether this scheduler waits for :meth:`start` to deliver anything: on a real
        clock, never started and not closed (a flow domain built on one warns, and so does
        the scheduler once an item it has a handler for is due for ``poll_interval``)."""
        return not (self._manual or self._started or self._closed)

    def _unstarted_head(self) -> tuple[bool, datetime | None]:
        waiting = self.needs_start
        head = self._mongo.next_due(self._delivery.routes()) if waiting else None
        return waiting, head

    def ping(self) -> None:
        """Reach the server once: :class:`~flowsched.SchedulerUnavailable` within
        ``op_timeout`` if it cannot be reached (a scheduler is built without a round trip)."""
        self._mongo.ping()

    def requeue(self, item_id: str, due: datetime | None = None, *, replace: bool = False) -> bool:
        """Schedule a dead letter again (due now, or at ``due``) with attempts reset.

        ``False`` if there is no dead letter with that id, or if an item of that id has been
        scheduled since it died (that newer item is left as it is and the stale dead letter
        is dropped); with ``replace`` (``timers requeue --replace``) it is overwritten."""
        when = self.now() if due is None else ensure_utc(due, "requeue due")
        return self._requeue_done(self._mongo.requeue(item_id, when, replace=replace))

    def start(self) -> None:
        """Start firing (a :class:`~flowsched.ManualClock`: attach to it), the change-stream
        reader and the heartbeats; idempotent. Warns once if the collection holds items
        stored before routing (``flowsched timers migrate``)."""
        first = not self._started
        super().start()
        self._start_watch.stop()
        if not first:
            return
        warn_unrouted(self._mongo)
        for helper in (self._wakeup, self._beats):
            if helper is not None:
                helper.start()

    def close(self) -> None:
        """Stop firing, wait for handlers in flight (at most ``shutdown_timeout``, then log
        what was left running: those claims lapse), write their outcomes; idempotent. The
        collection's client is closed only if :meth:`from_config` made it."""
        self._start_watch.stop()
        wakeup, self._wakeup = self._wakeup, None
        beats, self._beats = self._beats, None
        if wakeup is not None:
            wakeup.stop()
        if beats is not None:
            beats.stop()
        super().close()
        client, self._owned_client = self._owned_client, None
        if client is not None:
            client.close()
