"""Internal: who may act: the operator token, the sign-in cookie and the CSRF token.

Without a token the console is read-only: no page offers an action and every ``POST`` of an
action is a 403. With one, an action is a ``POST`` that must carry

* the token itself (form field ``token``), or the sign-in cookie that ``/login`` sets after
  checking it: an HMAC of the operator's name under a key made fresh for this process, so a
  cookie cannot be forged nor outlive the server;
* a CSRF token (form field ``csrf``): the HMAC of a random cookie set on every page, so a
  form posted from another site (which can neither read the cookie nor compute the HMAC)
  is refused.

Every comparison is ``hmac.compare_digest``. Cookies are ``HttpOnly`` and
``SameSite=Strict``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AUTH_COOKIE",
    "CSRF_COOKIE",
    "Forbidden",
    "Guard",
    "read_token_file",
]

AUTH_COOKIE = "flowsched_operator"
CSRF_COOKIE = "flowsched_csrf"
MAX_NAME = 60


class Forbidden(Exception):
    """An action refused (no, or a wrong, token or CSRF token); the message says which."""


def read_token_file(path: str | Path) -> str:
    """The token in ``path`` (surrounding whitespace dropped); ``ValueError`` if empty."""
    token = Path(path).read_text(encoding="utf-8").strip()
    if len(token) < 8:
        raise ValueError(f"token file {str(path)!r}: the token must be at least 8 characters")
    return token


@dataclass(frozen=True, slots=True)
class Signed:
    """A signed-in operator's name."""

    name: str


class Guard:
    """Checks actions against ``token`` (``None``: read-only, every action refused)."""

    def __init__(self, token: str | None, key: bytes | None = None) -> None:
        self._token = token.encode() if token is not None else None
        self._key = key or secrets.token_bytes(32)

    @property
    def read_only(self) -> bool:
        """Whether actions are refused whatever is sent."""
        return self._token is None

    def token_matches(self, given: str) -> bool:
        """Whether ``given`` is the token (constant time)."""
        if self._token is None:
            return False
        return hmac.compare_digest(given.encode("utf-8", "replace"), self._token)

    @staticmethod
    def new_csrf_cookie() -> str:
        """A fresh random value for the CSRF cookie."""
        return secrets.token_urlsafe(24)

    def csrf_for(self, cookie: str) -> str:
        """The CSRF token forms carry for the CSRF cookie ``cookie``."""
        return self._mac("csrf", cookie)

    def sign_in(self, name: str) -> str:
        """The sign-in cookie's value for operator ``name``."""
        encoded = base64.urlsafe_b64encode(name.encode()).decode()
        return f"{encoded}.{self._mac('auth', encoded)}"

    def operator(self, cookies: Mapping[str, str]) -> Signed | None:
        """The operator a valid sign-in cookie names, else ``None``."""
        value = cookies.get(AUTH_COOKIE, "")
        encoded, dot, mac = value.partition(".")
        if self.read_only or not dot:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac("auth", encoded).encode()):
            return None
        try:
            return Signed(base64.urlsafe_b64decode(encoded.encode()).decode())
        except (ValueError, UnicodeDecodeError):
            return None

    def check(self, form: Mapping[str, str], cookies: Mapping[str, str]) -> Signed:
        """The operator allowed to act, or :class:`Forbidden` saying what is missing."""
        if self.read_only:
            raise Forbidden("this console is read-only (started without --token-file)")
        self.check_csrf(form, cookies)
        token = form.get("token", "")
        if token:
            if not self.token_matches(token):
                raise Forbidden("wrong operator token")
            return Signed(clean_name(form.get("operator", "")))
        signed = self.operator(cookies)
        if signed is None:
            raise Forbidden("sign in with the operator token first (/login)")
        return signed

    def check_csrf(self, form: Mapping[str, str], cookies: Mapping[str, str]) -> None:
        """:class:`Forbidden` unless the form's ``csrf`` matches the CSRF cookie."""
        cookie = cookies.get(CSRF_COOKIE, "")
        given = form.get("csrf", "")
        if not cookie or not given:
            raise Forbidden("missing CSRF token: reload the page and try again")
        if not hmac.compare_digest(given.encode(), self.csrf_for(cookie).encode()):
            raise Forbidden("wrong CSRF token: reload the page and try again")

    def _mac(self, purpose: str, value: str) -> str:
        message = f"{purpose}:{value}".encode("utf-8", "replace")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()


def clean_name(name: str) -> str:
    """An operator's name as recorded: printable, at most :data:`MAX_NAME` characters."""
    kept = "".join(c for c in name if c.isprintable()).strip()[:MAX_NAME]
    return kept or "operator"
