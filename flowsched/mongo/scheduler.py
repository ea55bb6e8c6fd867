"""Internal: ``MongoScheduler``, durable timers in a MongoDB collection shared by nodes."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from pymongo.collection import Collection

from flowsched.clock import Clock, ManualClock, ensure_utc
from flowsched.delivery import DeliveryCore, Observer, RedeliveryPolicy
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy
from flowsched.mongo import scheduled_forms as forms
from flowsched.mongo.arguments import check_arguments, storable_id
from flowsched.mongo.change_stream import MAX_AWAIT, WakeUp
from flowsched.mongo.claimed_batch import BatchClaimer, deliver_in_thread
from flowsched.mongo.documents import dead_letter_from_document, dead_letters_from
from flowsched.mongo.local_writes import LocalWrites
from flowsched.mongo.migration import warn_if_unrouted
from flowsched.mongo.nodes import Heartbeat, node_ttl
from flowsched.mongo.outcome import call_within, cancel_attempts
from flowsched.mongo.server_clock import DEFAULT_MAX_SKEW, server_clock
from flowsched.mongo.settlement import Settlement
from flowsched.mongo.steering import MongoSteering
from flowsched.mongo.sweeper import Sweeper
from flowsched.mongo.transient import within
from flowsched.mongo.wiring import default_node_id, handles, store_parts
from flowsched.port import Handler, SchedulerPort
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind, not_an_item
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT, bounded_close, check_shutdown_timeout
from flowsched.start_watch import StartWatch
from flowsched.steering import Attempt

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig
    from flowsched.handler_limits import HandlerOptions

__all__ = ["MongoScheduler"]

T = TypeVar("T")


class MongoScheduler(SchedulerPort, MongoSteering):
    """Timers kept in a MongoDB collection: they survive the process, restarts and redeploys.

    Any number of schedulers (threads, processes, hosts) may share one collection: each due
    item is delivered to exactly one of them per attempt (a conditional claim with a lease),
    and an item whose claimer died is delivered again once its lease has run out. Delivery is
    at least once; handlers should be idempotent (``item.key`` is a good idempotency key).

    Once ``cancel``/``cancel_flow``/``schedule`` has returned on this node, the old form of
    the item is not delivered by this node, even if it was already claimed in the batch
    being run (:mod:`flowsched.mongo.local_writes`). An item another node has claimed is a delivery
    already running there: it may still finish after ``cancel`` returned, and its outcome
    never undoes the cancel or the replacement.

    ``collection`` is a pymongo ``Collection`` (or a mongomock one in tests); dead letters go
    to ``<name>_dead`` and malformed documents to ``<name>_quarantine`` beside it. It stays
    public as ``scheduler.collection`` (its ``database`` can hold your own collections).

    Routing: a node claims only the items it can run - those addressed to a handler name it
    has registered, and those of a kind it has subscribed to (one index range per route,
    see :mod:`flowsched.mongo.claims`). Other items stay scheduled for the nodes that serve
    them. A started node advertises its routes in ``<name>_nodes`` (a heartbeat renewed every
    poll, expiring after three; removed by ``close``): ``flowsched timers stats`` reads it.

    * ``poll_interval``: how often each node looks for due items (it bounds lateness); a node
      also sweeps sooner for an item it schedules itself that is due before the next poll.
    * ``batch_size``: items claimed per round trip; ``workers``: handler threads.
    * ``lease``: how long a claim lasts without renewal (renewed every third of it while the
      handler runs); ``server_time``/``max_clock_skew``: :mod:`flowsched.mongo.server_clock`.
    * ``op_timeout``: how long ``schedule``/``cancel``/... keep retrying through an outage
      before raising :class:`~flowsched.SchedulerUnavailable`.
    * ``push_wakeup``: watch the collection with a change stream (replica sets and sharded
      clusters), so that an item another node schedules due before this node's next poll
      fires on time rather than up to a poll late (:mod:`flowsched.mongo.change_stream`). Polling
      stays the source of truth; without change streams the node polls only.
    * ``buckets``: how many buckets the ids are spread over (shard key ``{bucket: 1, _id:
      1}``; 1 suits an unsharded collection); every node of a collection must agree (the
      first records it, a node given another gets a ``ConfigError``). ``serve_buckets``: the
      buckets this node claims from (default all; see docs/explanation/scaling.md).

    With a :class:`~flowsched.clock.ManualClock` there is no background thread: once
    started, the scheduler delivers inside ``clock.advance(...)``, each item at its due
    time, like the in-memory adapter; :meth:`run_due` delivers what is due now.
    """

    _owned_client: Any = None
    """The client :meth:`from_config` created, closed by :meth:`close` (``None``: the
    collection's client belongs to the caller)."""

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
        served = check_arguments(
            poll_interval, lease, op_timeout, batch_size, workers, buckets, serve_buckets
        )
        self.node_id = node_id or default_node_id()
        self._time = server_clock(clock, collection, server_time, max_clock_skew, self.node_id)
        self._clock: Clock = self._time.node  # a ManualClock, or a wall clock
        self._core = DeliveryCore(
            self._time, redelivery, observer, async_class="AsyncMongoScheduler"
        )
        self._store, self._claims, self._history = store_parts(
            collection, buckets, served, self.node_id, self._time, lease, history, self._core
        )
        self.collection: Any = self._store.items  # public: its database holds the _dead ones
        self._claimer = BatchClaimer(self._claims, self._core, self._time)
        self._local_writes = LocalWrites()
        self._poll_interval = poll_interval
        self._batch_size = batch_size
        self._workers = workers
        self._op_timeout = op_timeout
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._push_wakeup = push_wakeup
        self._sweeper: Sweeper | None = None
        self._wakeup: WakeUp | None = None
        self._started_manual = False
        self._closed = False
        self._start_watch = StartWatch()
        self._shutdown_timeout = check_shutdown_timeout(shutdown_timeout)

    def __repr__(self) -> str:
        return f"MongoScheduler({self._store.name!r}, node_id={self.node_id!r})"

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

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` (one upsert), replacing any item with its id, under a new generation.

        Returns the stored item: its ``due`` cut to whole milliseconds (BSON dates) and its
        new ``generation``. Raises ``SchedulerUnavailable`` if MongoDB cannot be reached
        within ``op_timeout``; ``ValueError`` if the payload cannot be stored as BSON."""
        if item.__class__ is not ScheduleItem:
            not_an_item(item)
        stored = self._store_item(item, replace=True)
        assert stored is not None  # a replacing write always stores
        if self.needs_start:
            self._start_watch.arm(self, self._poll_interval)
        return stored

    @property
    def needs_start(self) -> bool:
        """Whether this scheduler waits for :meth:`start` to deliver anything: on a real
        clock, never started and not closed. A :class:`~flowsched.FlowDomain` built on one
        warns, and so does the scheduler once an item it has a handler for is due for longer
        than ``poll_interval`` (a node that only schedules for others is not warned about)."""
        started = self._sweeper is not None or self._started_manual
        return not (isinstance(self._clock, ManualClock) or started or self._closed)

    def _unstarted_head(self) -> tuple[bool, datetime | None]:
        """For the start watch: (still unstarted, the earliest item it would claim, due now)."""
        waiting = self.needs_start
        return waiting, self.next_due(self._time.now()) if waiting else None

    def _store_item(self, item: ScheduleItem, replace: bool) -> ScheduleItem | None:
        """Write ``item`` under a new generation; without ``replace``, only if its id is free
        (``None`` if an item of that id is stored)."""
        document = forms.new_document(item, self._rng, self._store.bucket(item.id))
        what = f"schedule({item.id!r})"
        try:
            if replace:
                self._call(what, lambda before: self._store.put(document, before), write=True)
            elif not self._call(what, lambda _: self._store.insert(document), write=True):
                found = self._call(what, lambda: self._store.find(item.id))
                if not forms.ours(found, document):
                    return None
        finally:
            self._local_writes.touch(item.id)  # even on error: the write may have applied
        stored = forms.stored_form(item, document)
        self._core.scheduled(stored)
        if (sweeper := self._sweeper) is not None:
            sweeper.poke(stored.due)
        return stored

    def now(self) -> datetime:
        return self._time.measured_now(self._op_timeout)  # offset measured when due

    def cancel(self, item_id: str) -> bool:
        """Remove the item (one delete); ``False`` if there was none."""
        if not storable_id(item_id):
            return False  # an id no item can have (as in memory): no round trip
        try:
            first, again = cancel_attempts(self._store, item_id)
            removed = self._call(f"cancel({item_id!r})", first, again=again, write=True)
        finally:
            self._local_writes.touch(item_id)
        if removed:
            self._core.cancelled(item_id)
        return removed

    def cancel_flow(self, flow_id: str) -> int:
        """Remove every item of the flow instance (one ``delete_many``); how many went.

        With an observer that overrides ``cancelled``, the ids are read first (one more round
        trip) to report each; an item another caller removed meanwhile may be reported too."""
        if not storable_id(flow_id):
            return 0
        what = f"cancel_flow({flow_id!r})"
        ids: list[str] = []
        if self._core.observes_cancelled:
            ids = self._call(what, lambda: self._store.flow_ids(flow_id))
        try:
            removed = self._call(what, lambda at: self._store.delete_flow(flow_id, at), write=True)
        finally:
            self._local_writes.touch_flow(flow_id)
        for item_id in ids[:removed]:
            self._core.cancelled(item_id)
        return removed

    def exists(self, item_id: str) -> bool:
        """Whether the item is still scheduled (one lookup by ``_id``)."""
        what = f"exists({item_id!r})"
        return storable_id(item_id) and self._call(what, lambda: self._store.exists(item_id))

    def ping(self) -> None:
        """Reach the server once: :class:`SchedulerUnavailable` within ``op_timeout`` if it
        cannot be reached (a scheduler is built without a round trip: fail at start-up)."""
        ping = lambda: self._store.run(self._store.ping_steps())  # noqa: E731
        within(self._op_timeout, "ping", ping, self._store.items)

    def get(self, item_id: str) -> ScheduleItem | None:
        """The item as stored now (``due`` moves on redelivery), or ``None``.

        A malformed document reads as ``None`` (and is logged); the sweep quarantines it."""
        if not storable_id(item_id):
            return None
        document = self._call(f"get({item_id!r})", lambda: self._store.find(item_id))
        return forms.read_item(document, self._store.name)

    # -- delivery --------------------------------------------------------------------------

    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        """Deliver due items of ``kind`` without a handler name to ``handler``; this node
        claims only the routes it serves. ``ValueError`` if the kind already has a handler."""
        self._core.subscribe(kind, handler)
        self._served_more()

    def register(self, name: str, handler: Handler, **options: Unpack[HandlerOptions]) -> None:
        """Deliver due items addressed to ``name`` to ``handler`` (see
        :meth:`SchedulerPort.register`); from now on this node claims them."""
        self._core.register(name, handler, **options)
        self._served_more()

    def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first (:mod:`flowsched.mongo.history`)."""
        return self._call(f"history({item_id!r})", lambda: self._history.read(self._store, item_id))

    def _served_more(self) -> None:
        if (sweeper := self._sweeper) is not None:
            sweeper.poke()  # sweeps (and renews the heartbeat with the new route) at once

    def run_due(self) -> int:
        """Deliver, in this thread, every item due by the clock's now; return how many ran
        (a recurring item's tick counts as one). Sweeps until a claim finds nothing more, so
        items made due by the deliveries themselves (a redelivery or a new schedule due by
        now) run too. A started scheduler on a ManualClock is run this way by ``advance``."""
        # Handlers run one after another, in virtual time as a rule: no claim records its
        # start; each is checked right before its handler (start_check), as before start on
        # claim (the simulator's soak of this path holds only so: see the closing note).
        delivered, size = 0, self._batch_size
        while True:
            stamp = self._local_writes.open()
            try:
                batch = self._call(
                    "run_due claim", lambda: self._claimer.take(size, mark=True, start=0)
                )
                if not batch.won and not batch.quarantined:
                    return delivered
                delivered += deliver_in_thread(
                    batch, stamp, self._local_writes, self._core, self._write, self._claims
                )
            finally:
                self._local_writes.close(stamp)

    def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """When the earliest item this node would claim is ready (at or before ``until``,
        after ``after`` if given): one indexed query. How a started scheduler on a
        :class:`~flowsched.clock.ManualClock` steps through time."""
        routes = sorted(self._core.routes())
        if not routes or self._closed:
            return None
        return self._call("next_due", lambda: self._store.next_ready(routes, until, after))

    # -- dead letters ----------------------------------------------------------------------

    def dead_letters(self) -> list[DeadLetter]:
        """Items that exhausted ``max_attempts``, oldest first (malformed records skipped)."""
        documents = self._call("dead_letters", self._store.dead_letters)
        return dead_letters_from(documents, f"{self._store.name}_dead")

    def requeue(self, item_id: str, due: datetime | None = None, *, replace: bool = False) -> bool:
        """Schedule a dead letter again (due now, or at ``due``) with attempts reset.

        ``False`` if there is no dead letter with that id, or if an item of that id has been
        scheduled since it died: that newer item is left as it is and the stale dead letter
        is dropped (the in-memory adapter drops it when the new item is scheduled). With
        ``replace`` (the CLI's ``timers requeue --replace``), the newer item is overwritten."""
        what = f"requeue({item_id!r})"
        when = ensure_utc(due, "requeue due") if due is not None else self.now()
        document = self._call(what, lambda: self._store.dead_letter(item_id))
        if document is None:
            return False  # (a bad ``due`` is refused first, as in memory)
        old = dead_letter_from_document(document).item
        stored = self._store_item(old.moved(when, old.previous), replace=replace)
        self._call(what, lambda: self._store.remove_dead_letter(item_id, old.generation))
        return stored is not None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background sweeper; on a :class:`~flowsched.clock.ManualClock`, no
        thread: attach to the clock, whose ``advance`` then delivers (idempotent).

        Once, at start, warns if items stored before routing (no ``route``: no node claims
        them) need ``flowsched timers migrate`` (on the sweeper thread, or at once)."""
        with self._lock:
            if self._closed:
                raise SchedulerUnavailable(f"{self!r} is closed: it cannot start again")
            if self._sweeper is not None or self._started_manual:
                return
            self._start_watch.stop()
            if isinstance(self._clock, ManualClock):
                self._started_manual = True
                self._clock.attach(self)
                self._warn_if_unrouted()
                return
            self._sweeper = Sweeper(
                self._claimer,
                poll_interval=self._poll_interval,
                batch_size=self._batch_size,
                workers=self._workers,
                op_timeout=self._op_timeout,
                fence=self._local_writes,
                heartbeat=Heartbeat(self._store.nodes, self.node_id, node_ttl(self._poll_interval)),
                on_start=self._warn_if_unrouted,
            )
            self._sweeper.start()
            if self._push_wakeup:
                self._wakeup = WakeUp(
                    self._store.items,
                    self._sweeper.poke,
                    self._handles,
                    max_await=min(self._poll_interval, MAX_AWAIT),
                    paused=self._sweeper.sweeping,
                )
                self._wakeup.start()

    def _handles(self, document: Mapping[str, Any]) -> bool:
        """Whether this node claims the item of a (projected) document."""
        return handles(self._store, self._core, document)

    @bounded_close
    def close(self) -> None:
        """Stop sweeping, wait for running handlers, write their outcomes (idempotent).

        Claimed items whose handler had not started are given back at once. The collection's
        client is not closed (it belongs to the caller), unless :meth:`from_config` made it.
        It waits ``shutdown_timeout`` at most, logging the items left running (they lapse)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._start_watch.stop()
            sweeper, self._sweeper = self._sweeper, None
            wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            wakeup.stop()
        if isinstance(self._clock, ManualClock):
            self._clock.detach(self)
        if sweeper is not None:
            sweeper.stop()
        if self._owned_client is not None:
            self._owned_client.close()

    def _warn_if_unrouted(self) -> bool:
        return warn_if_unrouted(self._store)

    def _write(self, settlements: list[Settlement]) -> None:
        self._call("run_due settle", lambda: self._claims.settle(settlements, self._time.now()))

    def _call(self, what: str, op: Callable[..., T], **write: Any) -> T:
        """``op`` within ``op_timeout``; a ``write`` is given its fence (``OutcomeUnknown``:
        :func:`~flowsched.mongo.outcome.call_within`)."""
        return call_within(self._store, self._time, self._op_timeout, what, op, **write)
