"""Internal: the console's pages and actions: one method per route, rendering Jinja templates.

Reads are ``GET``; the three operator actions and sign-in are ``POST`` checked by
:class:`~flowsched.console.security.Guard`. A bad query string is a 400 page naming the
parameter (:class:`~flowsched.console.queries.BadQuery`), MongoDB trouble a 503 page with
the driver's reason (password removed), an action refused a 403 that changed nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from flowsched.clock import Clock
from flowsched.console.memory_source import MemorySource
from flowsched.console.queries import STATES, BadQuery, PageQuery, Params, TimerQuery, check_text
from flowsched.console.security import AUTH_COOKIE, CSRF_COOKIE, Forbidden, Guard, clean_name
from flowsched.console.source import MongoSource, Operator
from flowsched.console.views import (
    chart,
    dead_groups,
    dead_row,
    node_row,
    quarantine_row,
    route_rows,
    timer_detail,
    timer_row,
)
from flowsched.port import ScheduleKind

__all__ = ["Pages"]

log = logging.getLogger("flowsched.console")

Source = MongoSource | MemorySource

LIVE_SECONDS = 5
"""How often the overview's live part is fetched again (polling; see ``static/live.js``)."""


class Pages:
    """The pages over ``source``, shown as ``shown`` (a URI with its password masked)."""

    def __init__(
        self, source: Source, guard: Guard, env: Environment, clock: Clock, shown: str
    ) -> None:
        self.source = source
        self.guard = guard
        self.env = env
        self.clock = clock
        self.shown = shown

    # -- rendering -----------------------------------------------------------------------

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        """Template ``name`` with the common context; sets the CSRF cookie on first visit."""
        cookie = request.cookies.get(CSRF_COOKIE, "")
        fresh = not cookie or len(cookie) > 100
        if fresh:
            cookie = self.guard.new_csrf_cookie()
        signed = self.guard.operator(request.cookies)
        html = self.env.get_template(name).render(
            base=request.scope.get("root_path", ""),
            read_only=self.guard.read_only,
            operator=signed.name if signed else None,
            csrf=self.guard.csrf_for(cookie),
            shown=self.shown,
            source_name=self.source.name,
            needs_mongo=self.source.needs_mongo,
            runs_now=self.source.runs_now,
            live_seconds=LIVE_SECONDS,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        if fresh:
            response.set_cookie(
                CSRF_COOKIE, cookie, httponly=True, samesite="strict", path=_path(request)
            )
        return response

    def problem(self, request: Request, status: int, message: str) -> Response:
        """An error page with ``message`` (escaped like everything else)."""
        titles = {400: "Bad request", 403: "Not allowed", 404: "Not found", 503: "Unavailable"}
        return self.render(
            request, "error.html", status, title=titles.get(status, "Error"), message=message
        )

    def needs_mongo(self, request: Request, what: str) -> Response:
        """The page a MongoDB-only view shows over an in-memory scheduler."""
        return self.render(request, "needs_mongo.html", what=what)

    # -- reads ---------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        """Due load, lateness, failures and unserved routes; the live part refreshes itself."""
        if not self.source.lists:
            return self.needs_mongo(request, "The overview (due load, lateness, nodes)")
        per = _per(request)
        return self.render(request, "overview.html", per=per, **await self._live(per))

    async def live(self, request: Request) -> Response:
        """The overview's live part alone (fetched every few seconds by ``live.js``)."""
        if not self.source.lists:
            return self.problem(request, 404, "the overview needs a list of the timers")
        per = _per(request)
        return self.render(request, "_live.html", per=per, **await self._live(per))

    async def _live(self, per: str) -> dict[str, Any]:
        now = self.clock.now()
        starts, counts, later = await self.source.forecast(per)
        late_starts, late, earlier = await self.source.lateness()
        nodes = [node_row(doc, now) for doc in await self.source.node_documents()]
        routes = route_rows(await self.source.routes(), nodes)
        return {
            "now": now,
            "forecast": chart(starts, counts, later),
            "lateness": chart(late_starts, late, earlier),
            "failing": [r for r in routes if r["retrying"]],
            "dead": dead_groups(await self.source.dead_by_handler()),
            "unserved": [r for r in routes if not r["served_by"]],
        }

    async def timers(self, request: Request) -> Response:
        """The timers list: filters, one indexed page, a link to the next."""
        if not self.source.lists:
            return self.needs_mongo(request, "Listing and filtering timers")
        query = TimerQuery.parse(request.query_params.multi_items())
        now = self.clock.now()
        documents, more = await self.source.timers(query, now)
        rows = [timer_row(doc, now) for doc in documents]
        following = None
        if more and documents:
            following = urlencode(query.link(after=query.cursor_of(documents[-1])))
        return self.render(
            request,
            "timers.html",
            query=query,
            rows=rows,
            following=following,
            first=urlencode(query.link(after=None)) if query.after else None,
            kinds=[k.value for k in ScheduleKind],
            states=STATES,
        )

    async def timer(self, request: Request) -> Response:
        """One timer in full, its actions, and its audit (also when it is gone)."""
        params = Params(request.query_params.multi_items(), ("id",))
        item_id = params.text("id")
        if item_id is None:
            raise BadQuery("id: give the timer's id (/timer?id=...)")
        document = await self.source.timer(item_id)
        dead = await self.source.dead_letter(item_id)
        audit = await self.source.audit_of(item_id)
        status = 200 if document is not None or dead is not None or audit else 404
        detail = timer_detail(document, self.clock.now()) if document is not None else None
        return self.render(
            request,
            "timer.html",
            status,
            item_id=item_id,
            detail=detail,
            dead=dead_row(dead) if dead is not None else None,
            audit=audit,
        )

    async def dead_letters(self, request: Request) -> Response:
        """Dead letters, oldest first, each with a requeue button (when not read-only)."""
        page = PageQuery.parse(request.query_params.multi_items())
        documents, spec = await self.source.dead_letters(page)
        following = None
        if len(documents) == spec.limit:
            following = urlencode({"after": page.cursor_of(spec, documents[-1])})
        rows = [dead_row(doc) for doc in documents]
        return self.render(request, "dead.html", rows=rows, following=following)

    async def quarantine(self, request: Request) -> Response:
        """Documents moved aside as unusable, with the reason and the original."""
        if isinstance(self.source, MemorySource):
            return self.needs_mongo(request, "Quarantined documents")
        page = PageQuery.parse(request.query_params.multi_items())
        documents, spec = await self.source.quarantined(page)
        following = None
        if len(documents) == spec.limit:
            following = urlencode({"after": page.cursor_of(spec, documents[-1])})
        rows = [quarantine_row(doc) for doc in documents]
        return self.render(request, "quarantine.html", rows=rows, following=following)

    async def nodes(self, request: Request) -> Response:
        """Heartbeats (live and expired), the bucket count, routes and who serves them."""
        if isinstance(self.source, MemorySource):
            return self.needs_mongo(request, "Nodes, heartbeats and routes")
        Params(request.query_params.multi_items(), ())
        now = self.clock.now()
        nodes = [node_row(doc, now) for doc in await self.source.node_documents()]
        routes = route_rows(await self.source.routes(), nodes)
        buckets = await self.source.buckets()
        return self.render(request, "nodes.html", nodes=nodes, routes=routes, buckets=buckets)

    # -- sign-in and actions -------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        """The sign-in form (only when the console has a token)."""
        if self.guard.read_only:
            return self.problem(request, 403, "this console is read-only: there is no sign-in")
        return self.render(request, "login.html")

    async def login(self, request: Request) -> Response:
        """Check the token once and set the sign-in cookie."""
        form = await _form(request)
        self.guard.check_csrf(form, request.cookies)
        if self.guard.read_only or not self.guard.token_matches(form.get("token", "")):
            log.warning("console: refused sign-in from %s", _client(request))
            raise Forbidden("wrong operator token")
        name = clean_name(form.get("operator", ""))
        response = RedirectResponse(_path(request), status_code=303)
        response.set_cookie(
            AUTH_COOKIE,
            self.guard.sign_in(name),
            httponly=True,
            samesite="strict",
            path=_path(request),
        )
        return response

    async def logout(self, request: Request) -> Response:
        """Forget the sign-in cookie."""
        response = RedirectResponse(_path(request), status_code=303)
        response.delete_cookie(AUTH_COOKIE, path=_path(request))
        return response

    async def cancel(self, request: Request) -> Response:
        """``POST /timer/cancel``: remove the timer shown (its generation must still match)."""
        return await self._act(request, "cancel")

    async def run_now(self, request: Request) -> Response:
        """``POST /timer/run-now``: make the timer shown due now."""
        return await self._act(request, "run_now")

    async def requeue(self, request: Request) -> Response:
        """``POST /dead/requeue``: schedule the dead letter shown again, due now."""
        return await self._act(request, "requeue")

    async def _act(self, request: Request, action: str) -> Response:
        form = await _form(request)
        signed = self.guard.check(form, request.cookies)
        item_id = check_text("id", form.get("id", ""))
        if not item_id:
            raise BadQuery("id: which timer?")
        generation = _generation(form.get("generation", ""))
        who = Operator(signed.name, _client(request))
        outcome = await getattr(self.source, action)(item_id, generation, who)
        log.info("console: %s %s by %s: %s", action, item_id, who.name, outcome.message)
        target = f"{_path(request).rstrip('/')}/timer?{urlencode({'id': item_id})}"
        return RedirectResponse(target, status_code=303)


async def _form(request: Request) -> Mapping[str, str]:
    form = await request.form()
    values: dict[str, str] = {}
    for name, value in form.multi_items():
        if not isinstance(value, str) or name in values:
            raise BadQuery(f"form field {name[:40]!r}: one text value expected")
        values[name] = value
    return values


def _generation(text: str) -> int | None:
    if text in ("", "none"):
        return None
    if len(text) > 20 or not text.isascii() or not text.isdigit():
        raise BadQuery(f"generation: {text[:40]!r} is not a whole number")
    return int(text)


def _per(request: Request) -> str:
    params = Params(request.query_params.multi_items(), ("per",))
    per = params.text("per") or "hour"
    if per not in ("hour", "minute"):
        raise BadQuery(f"per: {per[:40]!r} is not one of hour, minute")
    return per


def _path(request: Request) -> str:
    return str(request.scope.get("root_path", "")) + "/"


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"
