"""Internal: ``AsyncMongoScheduler``, :class:`~flowsched.MongoScheduler` for asyncio
services (public as ``flowsched.AsyncMongoScheduler``).

Thin by design: the node core and its asyncio driver
(:class:`~flowsched.node.async_scheduler.AsyncNodeScheduler`) over an
:class:`~flowsched.mongo.AsyncMongoTimerStore` (a pymongo ``AsyncCollection``; a mongomock
collection in tests, run inline through :func:`~flowsched.store.as_async`), plus the
change-stream reader and the heartbeats as tasks. The same rules as the threaded face: the
core decides (CONTRACT section 15).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import Executor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from flowsched.async_delivery import AsyncDelivery
from flowsched.clock import Clock, ensure_utc
from flowsched.delivery import Observer
from flowsched.errors import SchedulerUnavailable
from flowsched.history import HistoryPolicy
from flowsched.mongo.arguments import check_async_collection
from flowsched.mongo.async_timer_store import AsyncMongoTimerStore
from flowsched.mongo.face import MongoFace, face_arguments
from flowsched.mongo.server_clock import DEFAULT_MAX_SKEW
from flowsched.mongo.timer_store import MongoTimerStore
from flowsched.node.async_scheduler import AsyncNodeScheduler
from flowsched.node.heartbeats import AsyncBeats
from flowsched.records import ScheduleItem
from flowsched.redelivery import RedeliveryPolicy
from flowsched.shutdown import DEFAULT_SHUTDOWN_TIMEOUT
from flowsched.store.async_face import AsyncOver
from flowsched.store.records import Claim

if TYPE_CHECKING:
    import asyncio

    from flowsched.config import SchedulingConfig

__all__ = ["AsyncMongoScheduler"]


class _Inline(AsyncOver):
    """A mongomock collection's store as an async one (tests: mongomock does no I/O), with
    what the MongoDB stores add to the interface."""

    sync: MongoTimerStore
    claim_round_trips = MongoTimerStore.claim_round_trips

    async def claim_started(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        return self.sync.claim_started(routes, owner, lease, limit)

    async def requeue(  # the MongoDB stores' replace
        self, item_id: str, due: datetime, *, replace: bool = False
    ) -> ScheduleItem | None:
        return self.sync.requeue(item_id, due, replace=replace)

    async def ping(self) -> None:
        self.sync.ping()

    async def heartbeat(self, node: str, routes: frozenset[str], ttl: timedelta) -> None:
        self.sync.heartbeat(node, routes, ttl)

    async def leave(self, node: str) -> None:
        self.sync.leave(node)


class AsyncMongoScheduler(MongoFace, AsyncNodeScheduler):
    """Timers in a MongoDB collection, for asyncio services: the port's calls as coroutines.

    ``collection`` is a pymongo ``AsyncCollection`` (``pymongo.AsyncMongoClient(...)[db][name]``,
    tz-aware client recommended; a synchronous ``Collection`` is a ``TypeError`` here). It may
    be shared with :class:`~flowsched.MongoScheduler` nodes and other ``AsyncMongoScheduler``
    nodes: each due item is delivered to exactly one node per attempt, routed by handler name
    and kind, and one whose node died is delivered again once its lease has run out.

    ``async def`` handlers are awaited on the loop, plain ones run in a worker thread
    (``executor``, else a pool of its own, a thread per slot); at most ``concurrency`` run
    at once. The other settings mean what they mean for :class:`~flowsched.MongoScheduler`.

    ``async with scheduler:`` starts firing on the running loop; on exit nothing more is
    claimed, the handlers in flight finish (after ``timeout`` seconds, given to
    :meth:`aclose`, else ``shutdown_timeout``, those still running are cancelled: not
    settled, their claims lapse and they are delivered again), their outcomes are written, no
    task left.
    With a :class:`~flowsched.clock.ManualClock` there is no firing task: ``await
    clock.advance_async(delta)`` delivers what falls due on the way (:meth:`run_due`).
    """

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
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ValueError(
                f"AsyncMongoScheduler concurrency must be an integer >= 1 (got {concurrency!r})"
            )
        store_args, node_args = face_arguments(
            node_id=node_id,
            poll_interval=poll_interval,
            clock=clock,
            redelivery=redelivery,
            observer=observer,
            batch_size=batch_size,
            lease=lease,
            workers=concurrency,
            op_timeout=op_timeout,
            buckets=buckets,
            serve_buckets=serve_buckets,
            server_time=None,
            max_clock_skew=max_clock_skew,
            shutdown_timeout=shutdown_timeout,
            history=history,
        )
        find = getattr(collection, "find_one_and_delete", None)
        store: AsyncMongoTimerStore | _Inline
        if inspect.iscoroutinefunction(find):
            store = self._mongo = AsyncMongoTimerStore(collection, **store_args)
        else:  # mongomock (tests): its calls do no I/O, run inline on the loop
            self._mongo = MongoTimerStore(collection, **store_args)
            store = _Inline(self._mongo)
        super().__init__(store, **node_args)
        self._async_store = store
        if executor is not None:
            self._deliver = AsyncDelivery(self._delivery, executor, threads=concurrency)
        self._push_wakeup = push_wakeup and not self._manual
        self._beats: AsyncBeats | None = None
        self._watch: asyncio.Task[None] | None = None
        self._check = False  # from_config(check=True): start() pings first

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
        ``op-timeout``, and the scheduler closes its client."""
        from flowsched.mongo.from_config import build_async

        scheduler = build_async(cls, config, node_id, clock, observer, client_factory, concurrency)
        scheduler._check = check
        return scheduler

    async def ping(self) -> None:
        """Reach the server once: :class:`~flowsched.SchedulerUnavailable` within
        ``op_timeout`` if it cannot be reached."""
        await self._async_store.ping()

    async def requeue(
        self, item_id: str, due: datetime | None = None, *, replace: bool = False
    ) -> bool:
        """Schedule a dead letter again (as :meth:`MongoScheduler.requeue`)."""
        when = await self._now_for_due() if due is None else ensure_utc(due, "requeue due")
        return self._requeue_done(await self._async_store.requeue(item_id, when, replace=replace))

    async def start(self) -> None:
        """Start firing on the running loop (a manual clock: attach to it), the change-stream
        reader and the heartbeats; idempotent. Built by ``from_config(..., check=True)``, it
        first reaches the server once: if it cannot within ``op_timeout``, the scheduler
        closes (and with it the client ``from_config`` made) and
        :class:`~flowsched.SchedulerUnavailable` is raised, before any task starts."""
        if self._closed:
            raise SchedulerUnavailable(f"start(): {type(self).__name__} is closed")
        if self._started:
            return
        if self._check:
            try:
                await self.ping()
            except BaseException:
                await self.aclose()
                raise
        await self._now_for_due()  # now() answers the database's time from here on
        await super().start()
        if self._manual:
            return
        self._beats = AsyncBeats(
            self._async_store,
            self.node_id,
            self._delivery.routes,
            self._core.settings.poll_interval,
        )
        self._beats.start()
        if self._push_wakeup:
            self._watch = self._follow()

    def _follow(self) -> asyncio.Task[None]:
        import asyncio

        from flowsched.mongo.async_wakeup import follow_changes

        ring = self._driver.wake
        poll = self._core.settings.poll_interval.total_seconds()
        watch = follow_changes(self._mongo.collection, ring, self._wanted, poll, self._claiming)
        return asyncio.get_running_loop().create_task(watch, name="flowsched-mongo-wakeup")

    async def aclose(self, timeout: float | timedelta | None = None) -> None:
        """Stop claiming and watching, wait for the handlers in flight (cancel those still
        running after ``timeout`` seconds, default ``shutdown_timeout``: given back, not
        settled, their items logged), write the outcomes; idempotent. Closes the client and
        executor :meth:`from_config` made."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(BaseException):  # cancelled, or ended by a logged error
                await watch
        beats, self._beats = self._beats, None
        if beats is not None:
            await beats.stop()
        await super().aclose(timeout)
        client, self._owned_client = self._owned_client, None
        if client is not None:
            await client.close()
        executor, self._owned_executor = self._owned_executor, None
        if executor is not None:  # a thread still running goes on (StillRunning)
            executor.shutdown(wait=False)
