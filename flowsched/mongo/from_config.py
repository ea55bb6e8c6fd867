"""Internal: ``MongoScheduler.from_config``, the collection and settings a config gives.

Kept apart from the scheduler so that it stays thin: everything read and validated lives in
:class:`~flowsched.config.SchedulerSettings`; this module only turns it into a client, a
collection and the constructor's arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pymongo.errors import ConfigurationError

from flowsched.clock import Clock
from flowsched.config import SchedulerSettings, SchedulingConfig
from flowsched.delivery import Observer
from flowsched.errors import ConfigError
from flowsched.scheduler_arguments import durable_arguments

if TYPE_CHECKING:
    from flowsched.mongo.async_scheduler import AsyncMongoScheduler
    from flowsched.mongo.scheduler import MongoScheduler

__all__ = ["build", "client_options"]

URI_KEY = "ipf-scheduler.mongodb.uri"


def client_options(settings: SchedulerSettings) -> dict[str, Any]:
    """The driver options ``from_config`` gives ``MongoClient`` besides the URI (the URI's
    own options win where both set one)."""
    millis = max(1, int(settings.op_timeout / timedelta(milliseconds=1)))
    return {
        "tz_aware": True,
        "appname": "flowsched",
        "serverSelectionTimeoutMS": millis,
        "connectTimeoutMS": millis,
    }


def build(
    cls: type[MongoScheduler],
    config: SchedulingConfig,
    node_id: str | None,
    clock: Clock | None,
    observer: Observer | None,
    client_factory: Callable[..., Any] | None,
    check: bool = False,
) -> MongoScheduler:
    """See :meth:`MongoScheduler.from_config`."""
    settings = config.scheduler_settings()
    database = settings.database()  # a missing database is named before any client is made
    if client_factory is None:
        from pymongo import MongoClient

        client_factory = MongoClient
    client = _client(settings, client_factory)
    try:
        scheduler = cls(
            client[database][settings.collection],
            workers=settings.workers,
            **_arguments(settings, node_id, clock, observer),
        )
    except BaseException:
        client.close()
        raise
    scheduler._owned_client = client
    scheduler.calendars = settings.calendars  # calendar="name" resolves against these
    if check:
        try:
            scheduler.ping()
        except BaseException:
            scheduler.close()  # closes the client it made
            raise
    return scheduler


def _arguments(
    settings: SchedulerSettings, node_id: str | None, clock: Clock | None, observer: Observer | None
) -> dict[str, Any]:
    """The constructor arguments both faces take from ``settings``."""
    arguments = durable_arguments(settings, node_id, clock, observer)
    return {**arguments, "buckets": settings.buckets, "max_clock_skew": settings.max_clock_skew}


def _client(settings: SchedulerSettings, client_factory: Callable[..., Any]) -> Any:
    """The client of ``settings`` (its URI, the options the URI does not set itself)."""
    uri = settings.mongo_uri()
    options = client_options(settings)
    for name in list(options):  # an option the URI sets is the URI's
        if f"{name.lower()}=" in uri.lower():
            del options[name]
    try:
        return client_factory(uri, **options)
    except (ConfigurationError, ValueError, TypeError) as exc:  # InvalidURI is one
        # The URI is not repeated: it may hold a password.
        raise ConfigError.single(
            f"the MongoDB driver refused it: {type(exc).__name__}: {exc}", key=URI_KEY
        ) from None


def build_async(
    cls: type[AsyncMongoScheduler],
    config: SchedulingConfig,
    node_id: str | None,
    clock: Clock | None,
    observer: Observer | None,
    client_factory: Callable[..., Any] | None,
    concurrency: int,
) -> AsyncMongoScheduler:
    """See :meth:`AsyncMongoScheduler.from_config` (the client is closed by ``aclose``)."""
    settings = config.scheduler_settings()
    database = settings.database()
    if client_factory is None:
        from pymongo import AsyncMongoClient

        client_factory = AsyncMongoClient
    client = _client(settings, client_factory)
    # `workers` is the handler threads on both faces: here the threads plain handlers run in
    # (async def handlers run on the loop; at most `concurrency` deliveries at once).
    executor = ThreadPoolExecutor(settings.workers, thread_name_prefix="flowsched-handler")
    try:
        scheduler = cls(
            client[database][settings.collection],
            concurrency=concurrency,
            executor=executor,
            **_arguments(settings, node_id, clock, observer),
        )
    except BaseException:  # nothing made here outlives a refused argument
        executor.shutdown(wait=False)
        _close_async_client(client)
        raise
    scheduler._owned_client, scheduler._owned_executor = client, executor
    scheduler.calendars = settings.calendars
    return scheduler


def _close_async_client(client: Any) -> None:
    """Close an ``AsyncMongoClient`` from synchronous code (``from_config`` is not a
    coroutine): its ``close()`` is a coroutine, run here on a loop of its own when no loop
    runs in this thread, else scheduled on the running one."""
    import asyncio
    import inspect

    closing = client.close()
    if not inspect.isawaitable(closing):
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(closing)  # type: ignore[arg-type]
    else:
        task: asyncio.Task[Any] = loop.create_task(closing)  # type: ignore[arg-type]
        _CLOSING.add(task)  # kept until done (the loop holds tasks only weakly)
        task.add_done_callback(_CLOSING.discard)


_CLOSING: set[Any] = set()
