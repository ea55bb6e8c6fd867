"""Internal: ``AsyncMongoScheduler``, durable timers in MongoDB, fired on an asyncio loop.

The same documents, claims, leases, fences and settlements as
:class:`~flowsched.mongo.MongoScheduler` - the very same procedures
(:mod:`flowsched.mongo.commands`: :class:`~flowsched.mongo.claims.Claims`,
:class:`~flowsched.mongo.claimed_batch.BatchClaimer`, the store's), run by the asyncio
driver on a pymongo ``AsyncCollection`` instead of the synchronous one - so both kinds of
node share one collection as one cluster. Only the driving differs: one firing task claims
due items, spawns a delivery task per claim (:mod:`flowsched.async_delivery`), writes the
finished outcomes in one fenced bulk write, and renews the leases of the claims it holds;
a change-stream task rings the firing task early when another node schedules an item due
before its next poll.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from flowsched.async_delivery import AsyncDelivery
from flowsched.async_port import AsyncHandler, AsyncSchedulerPort
from flowsched.clock import Clock, ensure_utc
from flowsched.delivery import DeliveryCore, Observer, RedeliveryPolicy
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy
from flowsched.mongo import scheduled_forms as forms
from flowsched.mongo.arguments import (
    check_arguments,
    check_async_collection,
    storable_id,
)
from flowsched.mongo.async_sweeper import AsyncSweeper
from flowsched.mongo.claimed_batch import BatchClaimer
from flowsched.mongo.commands import Steps, drive_async
from flowsched.mongo.documents import dead_letter_from_document, dead_letters_from
from flowsched.mongo.local_writes import LocalWrites
from flowsched.mongo.nodes import Heartbeat, node_ttl
from flowsched.mongo.outcome import async_cancel_attempts, write_deadline_async
from flowsched.mongo.server_clock import DEFAULT_MAX_SKEW, server_clock
from flowsched.mongo.steering import AsyncMongoSteering
from flowsched.mongo.transient import within_async
from flowsched.mongo.wiring import default_node_id, handles, store_parts
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind, not_an_item
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT, bounded_aclose, check_shutdown_timeout
from flowsched.steering import Attempt

if TYPE_CHECKING:
    from flowsched.config import SchedulingConfig
    from flowsched.handler_limits import HandlerOptions

__all__ = ["AsyncMongoScheduler"]

T = TypeVar("T")


class AsyncMongoScheduler(AsyncSchedulerPort, AsyncMongoSteering):
    """Timers in a MongoDB collection, for asyncio services: the port's calls as coroutines.

    ``collection`` is a pymongo ``AsyncCollection`` (``pymongo.AsyncMongoClient(...)[db][name]``,
    tz-aware client recommended). It may be shared with :class:`~flowsched.MongoScheduler`
    nodes and other ``AsyncMongoScheduler`` nodes: each due item is delivered to exactly one
    node per attempt, routed by handler name and kind, and one whose node died is delivered
    again once its lease has run out. Delivery is at least once.

    ``async def`` handlers are awaited on the loop, plain ones run in a worker thread
    (``executor``, else a pool of its own, a thread per slot); at most ``concurrency`` run
    at once. The other settings mean what they mean for :class:`~flowsched.MongoScheduler`
    (``poll_interval``, ``batch_size``, ``lease``, ``op_timeout``, ``push_wakeup``,
    ``buckets``, ``serve_buckets``, ``max_clock_skew``, ``shutdown_timeout``).

    ``async with scheduler:`` starts firing on the running loop; on exit nothing more is
    claimed, the handlers in flight finish (after ``timeout`` seconds, given to
    :meth:`aclose`, else ``shutdown_timeout``, those still running are cancelled: not
    settled, given back so they are delivered again), their outcomes are written, no task left.
    With a :class:`~flowsched.clock.ManualClock` there is no firing task: ``await
    clock.advance_async(delta)`` delivers what falls due on the way (:meth:`run_due`).
    """

    _owned_client: Any = None
    _owned_executor: Executor | None = None

    def __init__(
        self,
        collection: Any,
        node_id: str | None = None,
        poll_interval: timedelta = timedelta(seconds=1),
        clock: Clock | None = None,
        redelivery: RedeliveryPolicy | None = None,
        observer: Observer | None = None,
        *,
        batch_size: int = 100,
        lease: timedelta = timedelta(seconds=30),
        concurrency: int = 100,
        executor: Executor | None = None,
        op_timeout: timedelta = timedelta(seconds=10),
        push_wakeup: bool = True,
        buckets: int = 1,
        serve_buckets: Iterable[int] | None = None,
        max_clock_skew: timedelta = DEFAULT_MAX_SKEW,
        shutdown_timeout: timedelta = DEFAULT_SHUTDOWN_TIMEOUT,
        history: HistoryPolicy | None = None,
    ) -> None:
        check_async_collection(collection)
        self._shutdown_timeout = check_shutdown_timeout(shutdown_timeout)
        served = check_arguments(
            poll_interval, lease, op_timeout, batch_size, concurrency, buckets, serve_buckets
        )
        self.node_id = node_id or default_node_id()
        # The database's clock, as MongoScheduler judges by (no collection: measured by the
        # firing task; a ManualClock is trusted as it is).
        self._time = server_clock(clock, None, None, max_clock_skew, self.node_id)
        self._clock: Clock = self._time.node
        self._core = DeliveryCore(self._time, redelivery, observer, coroutines=True)
        self._store, self._claims, self._history = store_parts(
            collection, buckets, served, self.node_id, self._time, lease, history, self._core
        )
        self._local_writes = LocalWrites()
        attach = getattr(self._clock, "attach", None)
        self._manual = callable(attach)
        # Advertised by the firing task (a ManualClock has none: nothing to advertise).
        ttl = node_ttl(poll_interval)
        heartbeat = None if self._manual else Heartbeat(self._store.nodes, self.node_id, ttl)
        self._sweeper = AsyncSweeper(
            BatchClaimer(self._claims, self._core, self._time),
            AsyncDelivery(self._core, executor, threads=concurrency),
            self._time,
            concurrency=concurrency,
            batch_size=batch_size,
            poll_interval=poll_interval,
            local_writes=self._local_writes,
            heartbeat=heartbeat,
            op_timeout=op_timeout,
        )
        self._poll = poll_interval.total_seconds()
        self._op_timeout = op_timeout
        self._push_wakeup = push_wakeup
        self._rng = random.Random()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._closed = False
        self._close_done = asyncio.Event()
        self._check = False  # from_config(check=True): start() pings first

    @property
    def collection(self) -> Any:
        """The items collection (its ``database`` holds the ``_dead`` ones and yours)."""
        return self._store.items

    def __repr__(self) -> str:
        return f"AsyncMongoScheduler({self._store.name!r}, node_id={self.node_id!r})"

    @classmethod
    def from_config(
        cls,
        config: SchedulingConfig,
        *,
        node_id: str | None = None,
        clock: Clock | None = None,
        observer: Observer | None = None,
        client_factory: Callable[..., Any] | None = None,
        concurrency: int = 100,
        check: bool = False,
    ) -> AsyncMongoScheduler:
        """A scheduler on the collection ``ipf-scheduler.mongodb`` names, with the settings
        of ``ipf-scheduler.flowsched`` (as :meth:`MongoScheduler.from_config`); the client is
        ``client_factory(uri, **options)`` (default ``pymongo.AsyncMongoClient``), closed by
        :meth:`aclose`. This call is synchronous and makes no round trip. With ``check=True``
        the server is reached once first thing in :meth:`start` (``async with``): a server
        that is down is a :class:`~flowsched.SchedulerUnavailable` there, within
        ``op-timeout``, not at the first ``schedule``, and the scheduler closes its client.
        (Or ``await scheduler.ping()`` when you choose.)"""
        from flowsched.mongo.from_config import build_async

        scheduler = build_async(cls, config, node_id, clock, observer, client_factory, concurrency)
        scheduler._check = check
        return scheduler

    # -- the port --------------------------------------------------------------------------

    def now(self) -> datetime:
        """The database's time as this node reckons it: measured when it starts (and by
        ``create_single_timer``, ``schedule_recurring``, ``requeue`` and ``run_due``); before
        any of those, this node's own clock."""
        return self._time.now()

    async def _now_for_due(self) -> datetime:
        # The offset measured when due (first use, then every 30 s), started or not: a node
        # that only schedules writes due times by the database's clock too.
        command = self._store.items.database.command
        return await self._time.measured_now_async(command, self._op_timeout)

    async def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item`` (one upsert), replacing any item with its id, under a new
        generation; the stored item (``due`` cut to whole milliseconds) is returned."""
        if item.__class__ is not ScheduleItem:
            not_an_item(item)
        stored = await self._store_item(item, replace=True)
        assert stored is not None
        return stored

    async def _store_item(self, item: ScheduleItem, replace: bool) -> ScheduleItem | None:
        if self._closed:
            raise SchedulerUnavailable(f"{self!r} is closed: cannot schedule {item.id!r}")
        store = self._store
        document = forms.new_document(item, self._rng, store.bucket(item.id))
        what = f"schedule({item.id!r})"
        before = await write_deadline_async(self._time, store, self._op_timeout)
        try:
            if replace:
                await self._call(what, lambda: store.put_steps(document, before), write=True)
            elif not await self._call(what, lambda: store.insert_steps(document), write=True):
                found = await self._call(what, lambda: store.find_steps(item.id))
                if not forms.ours(found, document):
                    return None
        finally:
            self._local_writes.touch(item.id)
        stored = forms.stored_form(item, document)
        self._core.scheduled(stored)
        until = self._sweeper.sleeping_until
        if until is not None and stored.due < until:
            self._sweeper.alarm.ring()
        return stored

    async def cancel(self, item_id: str) -> bool:
        """Remove the item (one delete); ``False`` if there was none."""
        if not storable_id(item_id):
            return False
        before = await write_deadline_async(self._time, self._store, self._op_timeout)
        first, again = async_cancel_attempts(self._store, item_id, before)
        try:
            removed = await self._call(f"cancel({item_id!r})", first, write=True, again=again)
        finally:
            self._local_writes.touch(item_id)
        if removed:
            self._core.cancelled(item_id)
        return removed

    async def cancel_flow(self, flow_id: str) -> int:
        """Remove every item of the flow instance (one ``delete_many``); how many went."""
        if not storable_id(flow_id):
            return 0
        what = f"cancel_flow({flow_id!r})"
        ids: list[str] = []
        if self._core.observes_cancelled:
            ids = await self._call(what, lambda: self._store.flow_ids_steps(flow_id))
        before = await write_deadline_async(self._time, self._store, self._op_timeout)
        store = self._store
        try:
            removed = await self._call(
                what, lambda: store.delete_flow_steps(flow_id, before), write=True
            )
        finally:
            self._local_writes.touch_flow(flow_id)
        for item_id in ids[:removed]:
            self._core.cancelled(item_id)
        return removed

    async def exists(self, item_id: str) -> bool:
        if not storable_id(item_id):
            return False
        return await self._call(f"exists({item_id!r})", lambda: self._store.exists_steps(item_id))

    async def get(self, item_id: str) -> ScheduleItem | None:
        """The item as stored now, or ``None`` (a malformed document reads as ``None``)."""
        if not storable_id(item_id):
            return None
        what = f"get({item_id!r})"
        document = await self._call(what, lambda: self._store.find_steps(item_id))
        return forms.read_item(document, self._store.name)

    def subscribe(self, kind: ScheduleKind, handler: AsyncHandler) -> None:
        """Deliver due items of ``kind`` without a handler name to ``handler``."""
        self._core.subscribe(kind, handler)
        self._sweeper.alarm.ring()

    def register(self, name: str, handler: AsyncHandler, **options: Unpack[HandlerOptions]) -> None:
        """Deliver due items addressed to ``name`` to ``handler``; from now on this node
        claims them."""
        self._core.register(name, handler, **options)
        self._sweeper.alarm.ring()

    async def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first (:mod:`flowsched.mongo.history`)."""
        steps = self._history.read_steps
        return await self._call(f"history({item_id!r})", lambda: steps(self._store, item_id))

    async def dead_letters(self) -> list[DeadLetter]:
        """Items that exhausted ``max_attempts``, oldest first."""
        documents = await self._call("dead_letters", self._store.dead_letters_steps)
        return dead_letters_from(documents, f"{self._store.name}_dead")

    async def requeue(
        self, item_id: str, due: datetime | None = None, *, replace: bool = False
    ) -> bool:
        """Schedule a dead letter again (as :meth:`MongoScheduler.requeue`)."""
        what = f"requeue({item_id!r})"
        when = ensure_utc(due, "requeue due") if due is not None else await self._now_for_due()
        document = await self._call(what, lambda: self._store.dead_letter_steps(item_id))
        if document is None:
            return False  # (a bad ``due`` is refused first, as in memory)
        old = dead_letter_from_document(document).item
        stored = await self._store_item(old.moved(when, old.previous), replace=replace)
        await self._call(
            what, lambda: self._store.remove_dead_letter_steps(item_id, old.generation)
        )
        return stored is not None

    async def ping(self) -> None:
        """Reach the server once: :class:`SchedulerUnavailable` within ``op_timeout`` if it
        cannot be reached (a scheduler is built without a round trip: fail at start-up;
        ``from_config(..., check=True)`` has :meth:`start` do it)."""
        await self._call("ping", self._store.ping_steps, indexes=False)

    async def _call(
        self,
        what: str,
        steps: Callable[[], Steps[T]],
        indexes: bool = True,
        *,
        write: bool = False,
        again: Callable[[], Steps[T]] | None = None,
    ) -> T:
        """Run a procedure (after the indexes, once), retrying transient errors for
        ``op_timeout`` in all, then :class:`SchedulerUnavailable` - ``OutcomeUnknown`` for a
        ``write`` that may have been applied, after which ``again`` (if given) runs instead
        of ``steps`` (:func:`~flowsched.mongo.transient.within_async`)."""

        async def attempt(sent: bool) -> T:
            if indexes:
                await drive_async(self._store.ensure_indexes_steps(), self._store)
            procedure = again if sent and again is not None else steps
            return await drive_async(procedure(), self._store)

        collection = self._store.items
        return await within_async(self._op_timeout, what, attempt, collection, write=write)

    # -- life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start firing on the running loop (a manual clock: attach to it); idempotent. Built
        by ``from_config(..., check=True)``, it first reaches the server once
        (:meth:`ping`): if it cannot within ``op_timeout``, the scheduler closes (and with
        it the client ``from_config`` made) and :class:`SchedulerUnavailable` is raised,
        before any task starts."""
        if self._closed:
            raise SchedulerUnavailable(f"{self!r} is closed: it cannot start again")
        if self._started:
            return
        self._started = True
        try:
            if self._check:
                await self.ping()
            await self._call("start", lambda: self._store.ensure_indexes_steps())
            await self._now_for_due()  # now() answers the database's time from here on
        except BaseException:
            self._started = False  # nothing started: a later start() tries again
            if self._check:
                await self.aclose()
            raise
        if self._manual:
            getattr(self._clock, "attach")(self)  # noqa: B009 - a ManualClock
            return
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._sweeper.fire(), name="flowsched-mongo-firing"))
        if self._push_wakeup:
            from flowsched.mongo.async_wakeup import follow_changes

            watch = follow_changes(
                self._store.items,
                self._sweeper.alarm.ring,
                self._handles,
                self._poll,
                paused=lambda: self._sweeper.sweeping,
            )
            self._tasks.append(loop.create_task(watch, name="flowsched-mongo-wakeup"))

    def _handles(self, document: Mapping[str, Any]) -> bool:
        return handles(self._store, self._core, document)

    @bounded_aclose
    async def aclose(self, *, timeout: float | None = None) -> None:
        """Stop claiming, wait for the handlers in flight (cancel those still running after
        ``timeout`` seconds, default ``shutdown_timeout``: given back, not settled, their
        items logged), write the outcomes; idempotent. A second call while the first runs
        waits for it, unless a handler makes it (the first waits for that handler)."""
        if self._closed:
            if not self._sweeper.deliveries.running_here():
                await self._close_done.wait()
            return
        self._closed = self._sweeper.closing = True
        try:
            await self._close(timeout)
        finally:
            self._close_done.set()

    async def _close(self, timeout: float | None) -> None:
        if self._manual:
            detach = getattr(self._clock, "detach", None)
            if detach is not None:
                detach(self)
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._sweeper.close(timeout)
        if self._owned_client is not None:
            await self._owned_client.close()
        if self._owned_executor is not None:  # a thread still running goes on (StillRunning)
            self._owned_executor.shutdown(wait=False)

    # -- virtual time (ManualClock.advance_async) ------------------------------------------

    async def run_due(self) -> int:
        """Deliver every item due by the clock's now, awaiting each batch; how many ran."""
        if self._closed:
            return 0
        await self._now_for_due()  # claims judge due times by the database's clock
        return await self._sweeper.run_due()

    async def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        """When the earliest item this node would claim is ready (at or before ``until``,
        after ``after``): how a ManualClock steps through time."""
        routes = sorted(self._core.routes())
        if not routes or self._closed:
            return None
        steps = lambda: self._store.next_ready_steps(routes, until, after)  # noqa: E731
        return await self._call("next_due", steps)
