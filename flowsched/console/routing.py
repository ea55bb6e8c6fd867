"""Internal: the console's routes, error pages and the layer around every response.

:class:`Shell` wraps the whole application (outside Starlette's own error middleware), so
whatever happens inside, every response:

* is refused with a 400 when its ``Host`` is not allowed (``allowed_hosts``, as Starlette's
  ``TrustedHostMiddleware`` takes them: a name without its port, ``*.example.com``, ``*``);
* carries :data:`HEADERS` (a strict CSP, no sniffing, no referrer, no framing) and
  ``Cache-Control: no-store``;
* is a 500 page (with those headers) if anything escaped the handlers;
* is logged as method, path (never the query string), status and client.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from flowsched.console.actions import Actions
from flowsched.console.bulk_pages import BulkPages
from flowsched.console.driver import LoopClient
from flowsched.console.pages import Pages, base_path
from flowsched.console.queries import BadQuery
from flowsched.console.security import Forbidden, SignInNeeded, Throttled
from flowsched.errors import SchedulerUnavailable

__all__ = ["HEADERS", "LOOPBACK_HOSTS", "Shell", "build"]

log = logging.getLogger("flowsched.console")
access = logging.getLogger("flowsched.console.access")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]

HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")

_FALLBACK = (
    b"<!doctype html><title>Error</title><h1>Error</h1>"
    b'<p id="problem">The console failed on this request; the log says why.</p>'
)


def build(pages: Pages, client: LoopClient | None, allowed_hosts: Sequence[str] | None) -> Shell:
    """The console's ASGI application over ``pages``."""
    static = StaticFiles(directory=str(Path(__file__).parent / "static"))
    actions, bulk = Actions(pages), BulkPages(pages)
    read = pages.guarded
    routes = [
        Route("/", read(pages.overview)),
        Route("/overview/live", read(pages.live)),
        Route("/timers", read(pages.timers)),
        Route("/timer", read(pages.timer)),
        Route("/timer/cancel", actions.cancel, methods=["POST"]),
        Route("/timer/run-now", actions.run_now, methods=["POST"]),
        Route("/timer/redeliver", actions.redeliver, methods=["POST"]),
        Route("/dead", read(pages.dead_letters)),
        Route("/dead/requeue", actions.requeue, methods=["POST"]),
        Route("/quarantine", read(pages.quarantine)),
        Route("/nodes", read(pages.nodes)),
        Route("/audit", read(pages.audit_page)),
        Route("/bulk/cancel", read(bulk.preview), methods=["GET"]),
        Route("/bulk/cancel-flow", read(bulk.preview), methods=["GET"]),
        Route("/bulk/requeue", read(bulk.preview), methods=["GET"]),
        Route("/bulk/cancel", bulk.confirm, methods=["POST"]),
        Route("/bulk/cancel-flow", bulk.confirm, methods=["POST"]),
        Route("/bulk/requeue", bulk.confirm, methods=["POST"]),
        Route("/login", actions.login_form, methods=["GET"]),
        Route("/login", actions.login, methods=["POST"]),
        Route("/logout", actions.logout, methods=["POST"]),
        Mount("/static", static, name="static"),
    ]

    async def refused(request: Request, status: int, message: str, kind: str) -> Response:
        if request.method == "POST":
            action = request.url.path.rsplit("/", 1)[-1].replace("-", "_") or "post"
            await _audit_quietly(pages, request, action, f"refused ({kind}): {message}")
        return pages.problem(request, status, message)

    async def bad_query(request: Request, exc: Exception) -> Response:
        return await refused(request, 400, str(exc), "bad request")

    async def forbidden(request: Request, exc: Exception) -> Response:
        log.warning("console: refused %s %s: %s", request.method, request.url.path, exc)
        kind = exc.kind if isinstance(exc, Forbidden) else "refused"
        if kind == "sign_in" and request.url.path.endswith("/login"):
            return pages.problem(request, 403, str(exc))  # audited by the sign-in itself
        return await refused(request, 403, str(exc), kind)

    async def sign_in_needed(request: Request, exc: Exception) -> Response:
        if request.method == "GET" and not request.url.path.endswith("/live"):
            return RedirectResponse(base_path(request) + "login", status_code=303)
        return pages.problem(request, 401, "sign in first (/login)")

    async def throttled(request: Request, exc: Exception) -> Response:
        wait = exc.retry_after if isinstance(exc, Throttled) else 120
        response = pages.problem(request, 429, str(exc))
        response.headers["retry-after"] = str(wait)
        return response

    async def unavailable(request: Request, exc: Exception) -> Response:
        log.warning("console: %s", exc)
        return pages.problem(request, 503, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return pages.problem(request, status, str(getattr(exc, "detail", "error")))

    async def crashed(request: Request, exc: Exception) -> Response:
        log.error("console: %s %s failed", request.method, request.url.path, exc_info=exc)
        return pages.problem(request, 500, "the console failed on this request; the log says why")

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
            SignInNeeded: sign_in_needed,
            Throttled: throttled,
            SchedulerUnavailable: unavailable,
            HTTPException: http_error,
            Exception: crashed,
        },
        lifespan=lifespan,
    )
    shell = Shell(application, allowed_hosts)
    shell.pages = pages
    return shell


async def _audit_quietly(pages: Pages, request: Request, action: str, outcome: str) -> None:
    try:
        await pages.audit(request, action, False, outcome, what=f"POST {request.url.path}")
    except Exception as exc:  # the refusal still stands; the log says the audit failed
        log.error("console: could not record a refusal in the audit: %s", exc)


class Shell:
    """The layer around every request of ``app``: hosts, headers, last-resort 500, log."""

    pages: Pages | None = None
    """The pages inside (for benches and tests that call a source directly)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str] | None) -> None:
        self.app = app
        hosts = list(allowed_hosts) if allowed_hosts is not None else ["*"]
        self.any_host = "*" in hosts
        self.hosts = [h.lower() for h in hosts]

    @property
    def starlette(self) -> Any:
        """The Starlette application inside."""
        return self.app

    def host_allowed(self, scope: Scope) -> bool:
        """Whether the request's ``Host`` (without its port) is allowed."""
        if self.any_host:
            return True
        raw = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1").lower()
        host = raw.rsplit(":", 1)[0] if not raw.endswith("]") else raw
        host = host.strip("[]")
        for allowed in self.hosts:
            pattern = allowed.strip("[]")
            if host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:])):
                return True
        return False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 0}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = [*kept, *HEADERS]
            await send(message)

        try:
            if not self.host_allowed(scope):
                await _plain(
                    sending, 400, b"<!doctype html><p id='problem'>Invalid host header</p>"
                )
            else:
                await self.app(scope, receive, sending)
        except Exception as exc:
            if status["code"] == 0:
                await _plain(sending, 500, _FALLBACK)
            log.error("console: %s %s failed", scope.get("method"), scope.get("path"), exc_info=exc)
        finally:
            client = scope.get("client")
            access.info(
                "%s %s %s %s", client[0] if client else "-", scope.get("method"),
                scope.get("path"), status["code"],
            )  # fmt: skip


async def _plain(send: Callable[[Message], Awaitable[None]], status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/html; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})
