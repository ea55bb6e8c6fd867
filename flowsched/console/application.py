"""Internal: ``flowsched.console.app(...)``: the console as an ASGI application (Starlette).

Serve it with any ASGI server (``flowsched console`` uses uvicorn), or mount it in your own
service: ``Mount("/scheduler", app=console.app(database))``. Links and cookies follow the
mount path (``root_path``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from flowsched.cli.mongo_target import MongoTarget, redact
from flowsched.cli.timers_render import iso
from flowsched.clock import Clock, SystemClock
from flowsched.console.driver import LoopClient, LoopDatabase
from flowsched.console.memory_source import MemorySource
from flowsched.console.pages import Pages
from flowsched.console.queries import BadQuery
from flowsched.console.security import Forbidden, Guard, read_token_file
from flowsched.console.source import MongoSource
from flowsched.errors import SchedulerUnavailable

__all__ = ["app"]

log = logging.getLogger("flowsched.console")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                Awaitable[None]]  # fmt: skip

HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def app(
    target: Any = None,
    *,
    uri: str | None = None,
    scheduler: Any = None,
    database: Any = "flowsched",
    collection: str = "timers",
    token: str | None = None,
    token_file: str | Path | None = None,
    clock: Clock | None = None,
    query_budget_ms: int = 5000,
) -> Starlette:
    """The console over ``target``, as an ASGI application.

    ``target`` (or ``uri=``, ``scheduler=``) is one of:

    * a MongoDB URI: read with ``pymongo.AsyncMongoClient`` (``database``, ``collection``
      name the scheduler's collection, as ``MongoScheduler`` was given);
    * a database of the async or the sync driver (or mongomock), also as ``database=``:
      ``collection`` in it;
    * a running scheduler (``InMemoryScheduler``, or an async one whose ``get``,
      ``dead_letters``, ``requeue`` and ``cancel`` are coroutines): the timer, dead letter
      and audit pages work, the others say they need MongoDB.

    Read-only unless ``token`` (or ``token_file``) is given: then cancel, "run now" and
    requeue are offered to an operator who signs in with it, and each is recorded in
    ``<collection>_audit``. Every read is stopped after ``query_budget_ms``.

    >>> from flowsched import InMemoryScheduler
    >>> console = app(InMemoryScheduler())
    """
    if token is None and token_file is not None:
        token = read_token_file(token_file)
    clock = clock or SystemClock()
    if not isinstance(database, str):  # app(database=<a driver's database>)
        target, database = database, getattr(database, "name", "flowsched")
    for given in (uri, scheduler):
        target = given if target is None else target
    if target is None:
        raise TypeError("app(...): give a MongoDB URI, a database, or a scheduler")
    client: LoopClient | None = None
    shown = ""
    if isinstance(target, str):
        client, mongo = _client(target, query_budget_ms)
        shown = f"{redact(target)} {database}.{collection}"
        source: MongoSource | MemorySource = MongoSource(
            LoopDatabase(client, database), collection, clock, mongo.scrub, query_budget_ms
        )
    elif hasattr(target, "list_collection_names") or hasattr(target, "get_collection"):
        source = MongoSource(target, collection, clock, str, query_budget_ms)
        shown = f"{getattr(target, 'name', database)}.{collection}"
    elif hasattr(target, "get") and hasattr(target, "dead_letters"):
        source = MemorySource(target, clock)
        shown = f"a running {type(target).__name__}"
    else:
        raise TypeError(
            f"app(...): {type(target).__name__} is neither a MongoDB URI, a database, "
            "nor a scheduler (get, dead_letters, requeue, cancel)"
        )
    env = Environment(
        loader=PackageLoader("flowsched.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["iso"] = iso
    pages = Pages(source, Guard(token), env, clock, shown)
    return _starlette(pages, client)


def _client(uri: str, budget_ms: int) -> tuple[LoopClient, MongoTarget]:
    from datetime import timedelta

    try:
        import pymongo
    except ImportError:
        raise ImportError(
            "the console needs the driver: pip install 'flowsched[console]'"
        ) from None
    target = MongoTarget(uri, "", "", timedelta(milliseconds=budget_ms))

    def connect() -> Any:
        return pymongo.AsyncMongoClient(
            uri,
            tz_aware=True,
            serverSelectionTimeoutMS=max(budget_ms, 1000),
            connectTimeoutMS=max(budget_ms, 1000),
            appname="flowsched-console",
        )

    try:
        client = LoopClient(connect)
    except (pymongo.errors.PyMongoError, ValueError, TypeError) as exc:
        raise ValueError(f"invalid MongoDB URI {target.shown}: {target.scrub(exc)}") from None
    return client, target


def _starlette(pages: Pages, client: LoopClient | None) -> Starlette:
    static = StaticFiles(directory=str(Path(__file__).parent / "static"))
    routes = [
        Route("/", pages.overview),
        Route("/overview/live", pages.live),
        Route("/timers", pages.timers),
        Route("/timer", pages.timer),
        Route("/timer/cancel", pages.cancel, methods=["POST"]),
        Route("/timer/run-now", pages.run_now, methods=["POST"]),
        Route("/dead", pages.dead_letters),
        Route("/dead/requeue", pages.requeue, methods=["POST"]),
        Route("/quarantine", pages.quarantine),
        Route("/nodes", pages.nodes),
        Route("/login", pages.login_form, methods=["GET"]),
        Route("/login", pages.login, methods=["POST"]),
        Route("/logout", pages.logout, methods=["POST"]),
        Mount("/static", static, name="static"),
    ]

    async def bad_query(request: Request, exc: Exception) -> Response:
        return pages.problem(request, 400, str(exc))

    async def forbidden(request: Request, exc: Exception) -> Response:
        log.warning("console: refused %s %s: %s", request.method, request.url.path, exc)
        return pages.problem(request, 403, str(exc))

    async def unavailable(request: Request, exc: Exception) -> Response:
        message = str(exc)
        log.warning("console: %s", message)
        return pages.problem(request, 503, message)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return pages.problem(request, status, str(getattr(exc, "detail", "error")))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        if client is not None:
            await client.close()

    application = Starlette(
        routes=routes,
        exception_handlers={
            BadQuery: bad_query,
            Forbidden: forbidden,
            SchedulerUnavailable: unavailable,
            HTTPException: http_error,
        },
        lifespan=lifespan,
    )
    application.add_middleware(_SecurityHeaders)
    return application


class _SecurityHeaders:
    """Adds :data:`HEADERS` (CSP, nosniff, no referrer, no framing) to every response."""

    def __init__(self, app: ASGI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, sending)
