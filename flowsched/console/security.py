"""Internal: who may look and who may act: identities, sessions, CSRF, the throttle.

Identities come from a users file (``name:role:hash``), the operator token (one identity,
``token``, role operator), or a trusted reverse proxy's user header. With none configured
the console is open and read-only: no page offers an action and every action ``POST`` is a
403. With any configured, every page but ``/login`` and ``/static`` needs an identity.

* A sign-in is a server-side session (:class:`~flowsched.console.sessions.Sessions`): the
  cookie is random, expires after the session ttl, and is forgotten on sign-out.
* Every ``POST`` (``/login`` and ``/logout`` included) carries a CSRF token: the HMAC of a
  random cookie under a key made fresh for this process, so a form posted from another site
  (which can neither read the cookie nor compute the HMAC) is refused.
* Failed sign-ins are throttled per client (:class:`~flowsched.console.sessions.Throttle`).

Every comparison is constant time. Cookies are ``HttpOnly`` and ``SameSite=Strict``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from flowsched.clock import Clock
from flowsched.console.identity import Identity, Proxy, User, burn, verify_secret
from flowsched.console.sessions import Sessions, Throttle

__all__ = [
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "Forbidden",
    "Guard",
    "SignInNeeded",
    "Throttled",
    "read_token_file",
]

SESSION_COOKIE = "flowsched_session"
CSRF_COOKIE = "flowsched_csrf"
TOKEN_NAME = "token"
DEFAULT_TTL = timedelta(hours=8)


class Forbidden(Exception):
    """A request refused (no, or a wrong, secret, CSRF token or role); the message says which.

    ``kind`` names the refusal for the audit (``csrf``, ``role``, ``sign_in``, ``read_only``)."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.kind = kind


class SignInNeeded(Exception):
    """A page asked for without an identity on a console that has identities."""


class Throttled(Exception):
    """A sign-in asked for while its client is locked out; ``retry_after`` in seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed sign-ins from here: try again in {retry_after} s")
        self.retry_after = retry_after


def read_token_file(path: str | Path) -> str:
    """The token in ``path`` (surrounding whitespace dropped); ``ValueError`` if too short."""
    token = Path(path).read_text(encoding="utf-8").strip()
    if len(token) < 8:
        raise ValueError(f"token file {str(path)!r}: the token must be at least 8 characters")
    return token


class Guard:
    """Who a request is, and whether it may do what it asks."""

    def __init__(
        self,
        token: str | None = None,
        *,
        users: Mapping[str, User] | None = None,
        proxy: Proxy | None = None,
        clock: Clock | None = None,
        session_ttl: timedelta = DEFAULT_TTL,
        key: bytes | None = None,
    ) -> None:
        from flowsched.clock import SystemClock

        clock = clock or SystemClock()
        self._token = token.encode() if token is not None else None
        self.users: Mapping[str, User] = dict(users or {})
        self.proxy = proxy or Proxy()
        self.sessions = Sessions(clock, session_ttl)
        self.throttle = Throttle(clock)
        self._key = key or secrets.token_bytes(32)

    @property
    def identities(self) -> bool:
        """Whether any identity is configured (then every read needs one)."""
        return bool(self._token or self.users or self.proxy.user_header)

    @property
    def read_only(self) -> bool:
        """Whether no identity could ever act (no operator configured)."""
        operators = any(user.role == "operator" for user in self.users.values())
        return not (self._token or operators or self.proxy.user_header)

    @property
    def signs_in(self) -> bool:
        """Whether ``/login`` takes a secret (a users file with hashes, or a token)."""
        return bool(self._token) or any(u.hash for u in self.users.values())

    # -- identities ---------------------------------------------------------------------------

    def identity(
        self, peer: str | None, headers: Mapping[str, str], cookies: Mapping[str, str]
    ) -> Identity | None:
        """Who sent a request: the trusted proxy's user, else the live session's identity."""
        named = self.proxy.user(peer, headers)
        if named is not None:
            known = self.users.get(named)
            return Identity(named, known.role if known else "viewer", "proxy")
        session = self.sessions.get(cookies.get(SESSION_COOKIE))
        return session.identity if session else None

    def authenticate(self, name: str, secret: str) -> Identity | None:
        """The identity ``name`` with ``secret`` signs in as, or ``None`` (same work either way
        for a known and an unknown name). The token signs in as ``token`` whatever the name."""
        user = self.users.get(name)
        if user is not None and user.hash is not None:
            if verify_secret(secret, user.hash):
                return Identity(user.name, user.role, "password")
        elif self.users:
            burn(secret)
        if self._token is not None and (name in ("", TOKEN_NAME) or user is None):
            given = secret.encode("utf-8", "replace")
            if hmac.compare_digest(given, self._token):
                return Identity(TOKEN_NAME, "operator", "token")
        return None

    def client(self, peer: str | None, headers: Mapping[str, str]) -> str:
        """The client's address (``X-Forwarded-For`` only from a trusted proxy)."""
        return self.proxy.client(peer, headers)

    # -- CSRF ---------------------------------------------------------------------------------

    @staticmethod
    def new_csrf_cookie() -> str:
        """A fresh random value for the CSRF cookie."""
        return secrets.token_urlsafe(24)

    def csrf_for(self, cookie: str) -> str:
        """The CSRF token forms carry for the CSRF cookie ``cookie``."""
        return self._mac("csrf", cookie)

    def check_csrf(self, form: Mapping[str, str], cookies: Mapping[str, str]) -> None:
        """:class:`Forbidden` unless the form's ``csrf`` matches the CSRF cookie."""
        cookie = cookies.get(CSRF_COOKIE, "")
        given = form.get("csrf", "")
        if not cookie or not given:
            raise Forbidden("missing CSRF token: reload the page and try again", "csrf")
        if not hmac.compare_digest(given.encode(), self.csrf_for(cookie).encode()):
            raise Forbidden("wrong CSRF token: reload the page and try again", "csrf")

    def check_operator(self, identity: Identity | None) -> Identity:
        """``identity`` if it may act, else :class:`Forbidden` saying why."""
        if self.read_only:
            raise Forbidden(
                "this console is read-only (started with no operator identity)", "read_only"
            )
        if identity is None:
            raise Forbidden("sign in as an operator first (/login)", "sign_in")
        if not identity.operator:
            raise Forbidden(f"{identity.name} is a viewer: actions need the operator role", "role")
        return identity

    def _mac(self, purpose: str, value: str) -> str:
        message = f"{purpose}:{value}".encode("utf-8", "replace")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()
