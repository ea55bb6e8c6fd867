"""Internal: sign-in, sign-out and the actions on one timer (each a ``POST`` with a CSRF token).

Every sign-in, sign-out, refusal and action is recorded in the audit with the identity the
server established (:mod:`flowsched.console.audit`): a name typed in a form is never taken
as who did something. An action that fails part way (MongoDB gone) is recorded as failed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from flowsched.console.pages import Pages, base_path
from flowsched.console.queries import BadQuery, check_text
from flowsched.console.security import SESSION_COOKIE, Forbidden, Throttled
from flowsched.console.source import Operator

__all__ = ["Actions", "read_form"]

log = logging.getLogger("flowsched.console")
MAX_GENERATION = 2**63 - 1


class Actions:
    """The ``POST`` routes (and the sign-in form) over ``pages``."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.guard = pages.guard

    async def login_form(self, request: Request) -> Response:
        """The sign-in form (when the console takes a secret)."""
        if not self.guard.signs_in:
            return self.pages.problem(
                request, 403, "this console has no sign-in (no users file or token)"
            )
        return self.pages.render(request, "login.html")

    async def login(self, request: Request) -> Response:
        """Check a name and secret (throttled per client) and open a session."""
        client = self.pages.client(request)
        wait = self.guard.throttle.retry_after(client)
        if wait:
            raise Throttled(wait)
        form = await read_form(request)
        self.guard.check_csrf(form, request.cookies)
        name = check_text("user", form.get("user", "").strip())[:60]
        secret = form.get("secret", "")
        if len(secret) > 1024:
            raise BadQuery("secret: longer than 1024 characters")
        identity = None
        if self.guard.signs_in and secret:
            identity = await anyio.to_thread.run_sync(self.guard.authenticate, name, secret)
        if identity is None:
            lock = self.guard.throttle.failed(client)
            log.warning("console: refused sign-in from %s", client)
            await self.pages.audit(request, "sign_in", False, "wrong name or secret",
                                   what=f"as {name!r}" if name else None)  # fmt: skip
            if lock:
                await self.pages.audit(request, "throttled", False,
                                       f"sign-ins from {client} locked for {lock} s")  # fmt: skip
            raise Forbidden("wrong name or secret", "sign_in")
        self.guard.throttle.succeeded(client)
        request.scope["identity"] = identity
        await self.pages.audit(request, "sign_in", True, f"signed in as {identity.role}")
        response = RedirectResponse(base_path(request), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            self.guard.sessions.open(identity),
            max_age=int(self.guard.sessions.ttl.total_seconds()),
            httponly=True,
            samesite="strict",
            path=base_path(request),
            secure=self.pages.secure(request),
        )
        return response

    async def logout(self, request: Request) -> Response:
        """End the session on the server (its cookie is refused from now on)."""
        form = await read_form(request)
        self.guard.check_csrf(form, request.cookies)
        session = self.guard.sessions.revoke(request.cookies.get(SESSION_COOKIE))
        if session is not None:
            request.scope["identity"] = session.identity
            await self.pages.audit(request, "sign_out", True, "signed out")
        target = base_path(request) + ("login" if self.guard.signs_in else "")
        response = RedirectResponse(target, status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=base_path(request))
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

    async def redeliver(self, request: Request) -> Response:
        """``POST /timer/redeliver``: end the claim of a node whose heartbeat lapsed."""
        return await self._act(request, "redeliver")

    async def _act(self, request: Request, action: str) -> Response:
        form = await read_form(request)
        self.guard.check_csrf(form, request.cookies)
        identity = self.guard.check_operator(self.pages.identity(request))
        item_id = check_text("id", form.get("id", ""))
        if not item_id:
            raise BadQuery("id: which timer?")
        generation = parse_generation(form.get("generation", ""))
        who = Operator(identity, self.pages.client(request))
        method = getattr(self.pages.source, action, None)
        if method is None:
            raise Forbidden(f"{action} needs MongoDB", "unsupported")
        try:
            outcome = await method(item_id, generation, who)
        except Exception as exc:
            await self.pages.audit(request, action, False,
                                   f"failed: {type(exc).__name__}", item_id=item_id)  # fmt: skip
            raise
        log.info("console: %s %s by %s: %s", action, item_id, who.name, outcome.message)
        target = f"{base_path(request).rstrip('/')}/timer?{urlencode({'id': item_id})}"
        return RedirectResponse(target, status_code=303)


async def read_form(request: Request) -> Mapping[str, str]:
    """A form's fields, each a single text value; :class:`BadQuery` otherwise."""
    form: Any = await request.form(max_files=0, max_fields=200, max_part_size=64 * 1024)
    values: dict[str, str] = {}
    for name, value in form.multi_items():
        if not isinstance(value, str) or name in values:
            raise BadQuery(f"form field {name[:40]!r}: one text value expected")
        values[name] = value
    return values


def parse_generation(text: str) -> int | None:
    """A form's ``generation``: a whole number that fits MongoDB's 64 bits, or none."""
    if text in ("", "none", "None"):
        return None
    if len(text) > 19 or not text.isascii() or not text.isdigit() or int(text) > MAX_GENERATION:
        raise BadQuery(f"generation: {text[:40]!r} is not a whole number below 2**63")
    return int(text)
