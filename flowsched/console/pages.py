"""Internal: the console's read pages: one method per route, rendering Jinja templates.

Reads are ``GET``. With identities configured each needs one (:meth:`Pages.guarded`); the
sign-in, actions and bulk work are in :mod:`flowsched.console.actions` and
:mod:`flowsched.console.bulk_pages`. A bad query string is a 400 naming the parameter
(:class:`~flowsched.console.queries.BadQuery`; the timers list keeps its filter form),
MongoDB trouble a 503 with the driver's reason (password removed).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from flowsched.clock import Clock
from flowsched.console.audit import AuditQuery, cursor_of, entry
from flowsched.console.identity import Identity
from flowsched.console.memory_source import MemorySource
from flowsched.console.queries import STATES, BadQuery, PageQuery, Params, TimerQuery
from flowsched.console.security import CSRF_COOKIE, Guard, SignInNeeded
from flowsched.console.source import COUNT_LIMIT, MongoSource
from flowsched.console.store_source import StoreSource
from flowsched.console.views import (
    chart,
    dead_detail,
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

Source = MongoSource | MemorySource | StoreSource
Endpoint = Callable[[Request], Awaitable[Response]]

LIVE_SECONDS = 5
"""How often the overview's live part is fetched again (polling; see ``static/live.js``)."""
GONE_FOR = timedelta(hours=24)
"""How long a node whose heartbeat went stays listed (as seen by this console)."""


class Pages:
    """The pages over ``source``, shown as ``shown`` (a URI with its password masked)."""

    def __init__(
        self,
        source: Source,
        guard: Guard,
        env: Environment,
        clock: Clock,
        shown: str,
        hide_payloads: bool = False,
    ) -> None:
        self.source = source
        self.guard = guard
        self.env = env
        self.clock = clock
        self.shown = shown
        self.hide_payloads = hide_payloads
        self._seen_nodes: dict[str, Any] = {}

    # -- who is asking ---------------------------------------------------------------------------

    def identity(self, request: Request) -> Identity | None:
        """The request's identity (set once per request)."""
        if "identity" not in request.scope:
            peer = request.client.host if request.client else None
            request.scope["identity"] = self.guard.identity(peer, request.headers, request.cookies)
        found: Identity | None = request.scope["identity"]
        return found

    def client(self, request: Request) -> str:
        """The client's address (``X-Forwarded-For`` only from a trusted proxy)."""
        peer = request.client.host if request.client else None
        return self.guard.client(peer, request.headers)

    def secure(self, request: Request) -> bool:
        """Whether the browser reached the console over HTTPS (directly, or as a trusted
        proxy's ``X-Forwarded-Proto`` says): then cookies are ``Secure``."""
        if request.url.scheme == "https":
            return True
        peer = request.client.host if request.client else None
        forwarded = request.headers.get("x-forwarded-proto", "").strip().lower()
        return forwarded == "https" and self.guard.proxy.is_trusted(peer)

    def guarded(self, endpoint: Endpoint) -> Endpoint:
        """``endpoint``, refused to a request without an identity when identities exist."""

        async def checked(request: Request) -> Response:
            if self.guard.identities and self.identity(request) is None:
                raise SignInNeeded(request.url.path)
            return await endpoint(request)

        checked.__name__ = getattr(endpoint, "__name__", "endpoint")
        return checked

    async def audit(self, request: Request, action: str, done: bool, outcome: str,
                    **fields: Any) -> None:  # fmt: skip
        """Record one audit entry for ``request`` (who, from where, now)."""
        await self.source.audit_log.record(
            entry(self.clock.now(), action, self.identity(request), self.client(request), done,
                  outcome, **fields)
        )  # fmt: skip

    # -- rendering -------------------------------------------------------------------------------

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        """Template ``name`` with the common context; sets the CSRF cookie on first visit."""
        cookie = request.cookies.get(CSRF_COOKIE, "")
        fresh = not cookie or len(cookie) > 100
        if fresh:
            cookie = self.guard.new_csrf_cookie()
        who = self.identity(request)
        html = self.env.get_template(name).render(
            base=request.scope.get("root_path", ""),
            read_only=self.guard.read_only,
            signs_in=self.guard.signs_in,
            identity=who,
            can_act=who is not None and who.operator and not self.guard.read_only,
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
                CSRF_COOKIE, cookie, httponly=True, samesite="strict", path=base_path(request),
                secure=self.secure(request),
            )  # fmt: skip
        return response

    def problem(self, request: Request, status: int, message: str) -> Response:
        """An error page with ``message`` (escaped like everything else)."""
        titles = {400: "Bad request", 401: "Sign in", 403: "Not allowed", 404: "Not found",
                  429: "Too many sign-ins", 503: "Unavailable"}  # fmt: skip
        return self.render(
            request, "error.html", status, title=titles.get(status, "Error"), message=message
        )

    def needs_mongo(self, request: Request, what: str) -> Response:
        """The page a MongoDB-only view shows over an in-memory scheduler."""
        return self.render(request, "needs_mongo.html", what=what)

    # -- reads -----------------------------------------------------------------------------------

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
        step = timedelta(hours=1) if per == "hour" else timedelta(minutes=10)
        return {
            "now": now,
            "forecast": chart(starts, counts, later, step),
            "lateness": chart(late_starts, late, earlier, timedelta(minutes=5)),
            "failing": [r for r in routes if r["retrying"]],
            "dead": dead_groups(await self.source.dead_by_handler()),
            "unserved": [r for r in routes if not r["served_by"]],
        }

    async def timers(self, request: Request) -> Response:
        """The timers list, soonest due first: filters, the count of matches, one indexed
        page, links to the previous and the next. A bad filter keeps the form (400)."""
        if not self.source.lists:
            return self.needs_mongo(request, "Listing and filtering timers")
        items = request.query_params.multi_items()
        try:
            query = TimerQuery.parse(items)
        except BadQuery as exc:
            raw = {name: value[:200] for name, value in items if name in TimerQuery.FILTERS}
            return self._timers_page(request, 400, raw, problem=str(exc))
        now = self.clock.now()
        documents, more = await self.source.timers(query, now)
        count = await self.source.count(query, now)
        rows = [timer_row(doc, now) for doc in documents]
        following = previous = None
        if documents and (query.before is not None or more):
            following = urlencode(query.link(after=query.cursor_of(documents[-1])))
        if documents and (query.after is not None or (query.before is not None and more)):
            previous = urlencode(query.link(before=query.cursor_of(documents[0])))
        form = {name: value for name, value in query.link(after=None) if name != "limit"}
        return self._timers_page(
            request, 200, form, query=query, rows=rows, following=following,
            previous=previous, count=count,
            more_than=count >= getattr(self.source, "count_limit", COUNT_LIMIT),
            filters=urlencode(query.link(after=None, limit=None)),
        )  # fmt: skip

    def _timers_page(self, request: Request, status: int, form: dict[str, str],
                     **context: Any) -> Response:  # fmt: skip
        context.setdefault("rows", [])
        return self.render(
            request, "timers.html", status, form=form,
            kinds=[k.value for k in ScheduleKind], states=STATES, **context,
        )  # fmt: skip

    async def timer(self, request: Request) -> Response:
        """One timer in full, its actions, its attempts and its audit (also when it is gone;
        a dead letter's page: its handler, payload and requeue)."""
        params = Params(request.query_params.multi_items(), ("id",))
        item_id = params.text("id")
        if item_id is None:
            raise BadQuery("id: give the timer's id (/timer?id=...)")
        document = await self.source.timer(item_id)
        dead = await self.source.dead_letter(item_id)
        audit = await self.source.audit_of(item_id)
        status = 200 if document is not None or dead is not None or audit else 404
        now = self.clock.now()
        detail = None
        if document is not None:
            detail = timer_detail(document, now, self.hide_payloads)
            owner = detail.get("owner")
            if owner is not None and isinstance(self.source, MongoSource):
                detail["lapsed"] = _lapsed(await self.source.node(owner), now)
        # Section 18's history() (another module's work) fills this when the source has it.
        history = await _history(self.source, item_id)
        return self.render(
            request,
            "timer.html",
            status,
            item_id=item_id,
            detail=detail,
            dead=dead_detail(dead, self.hide_payloads) if dead is not None else None,
            audit=audit,
            history=history,
        )

    async def dead_letters(self, request: Request) -> Response:
        """Dead letters, oldest first, each linking to its page; requeue per handler."""
        page = PageQuery.parse(request.query_params.multi_items())
        documents, spec = await self.source.dead_letters(page)
        following = None
        if len(documents) == spec.limit:
            following = urlencode({"after": page.cursor_of(spec, documents[-1])})
        rows = [dead_row(doc) for doc in documents]
        groups = dead_groups(await self.source.dead_by_handler())
        return self.render(request, "dead.html", rows=rows, following=following, groups=groups)

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
        """Heartbeats (live and expired), nodes gone but still holding claims or seen in the
        last day, the bucket count, routes and who serves them."""
        if isinstance(self.source, MemorySource):
            return self.needs_mongo(request, "Nodes, heartbeats and routes")
        Params(request.query_params.multi_items(), ())
        now = self.clock.now()
        nodes = [node_row(doc, now) for doc in await self.source.node_documents()]
        for node in nodes:
            self._seen_nodes[node["id"]] = {**node, "live": False, "gone": True, "seen_at": now}
        held = {str(g.get("_id")): int(g.get("n", 0)) for g in await self.source.claim_owners()}
        listed = {node["id"] for node in nodes}
        for node_id, seen in list(self._seen_nodes.items()):
            if node_id not in listed and (node_id in held or _recent(seen, now)):
                nodes.append(seen)
                listed.add(node_id)
            elif node_id not in listed:
                del self._seen_nodes[node_id]
        for node_id in sorted(set(held) - listed):
            nodes.append({"id": node_id, "live": False, "gone": True, "routes": [],
                          "renewed_at": "-", "expires_at": "no heartbeat"})  # fmt: skip
        for node in nodes:
            node["claims"] = held.get(node["id"], 0)
        routes = route_rows(await self.source.routes(), nodes)
        buckets = await self.source.buckets()
        return self.render(request, "nodes.html", nodes=nodes, routes=routes, buckets=buckets)

    async def audit_page(self, request: Request) -> Response:
        """The audit across timers, newest first, filtered by who, action, outcome, item."""
        query = AuditQuery.parse(request.query_params.multi_items())
        records = await self.source.audit_log.find(query)
        following = None
        if len(records) == query.limit:
            following = urlencode(query.link(after=cursor_of(records[-1])))
        return self.render(request, "audit.html", query=query, records=records,
                           following=following)  # fmt: skip


async def _history(source: Source, item_id: str) -> list[Any] | None:
    # The source's history(item_id) (section 18); a source without one, or one over a
    # scheduler that keeps none (None), gets a page saying the history is not recorded.
    history = getattr(source, "history", None)
    if history is None:
        return None
    found = await history(item_id)
    return None if found is None else list(found)


def _lapsed(heartbeat: Any, now: Any) -> bool:
    from datetime import datetime

    from flowsched.mongo.documents import bson_utc

    expires = heartbeat.get("expires_at") if heartbeat is not None else None
    return not (isinstance(expires, datetime) and bson_utc(expires) > now)


def _recent(seen: dict[str, Any], now: Any) -> bool:
    when = seen.get("seen_at")
    return when is None or now - when < GONE_FOR


def _per(request: Request) -> str:
    params = Params(request.query_params.multi_items(), ("per",))
    per = params.text("per") or "hour"
    if per not in ("hour", "minute"):
        raise BadQuery(f"per: {per[:40]!r} is not one of hour, minute")
    return per


def base_path(request: Request) -> str:
    """The console's own path, ``/`` under its mount point."""
    return str(request.scope.get("root_path", "")) + "/"
