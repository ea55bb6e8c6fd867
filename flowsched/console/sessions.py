"""Internal: sign-ins kept on the server (:class:`Sessions`) and failed sign-ins slowed down
(:class:`Throttle`), both on an injected clock.

A session cookie is a random 256-bit value; the server keeps what it stands for (the
identity and its expiry) and forgets it on sign-out, so a copied cookie is refused from then
on, and a restart signs everyone out. Failed sign-ins are counted per client address: after
:data:`FREE_FAILURES` of them, each further one locks that client out for twice as long as
the last (1 s, 2 s, 4 s, ..., at most :data:`MAX_LOCK`); while locked, every sign-in is
answered 429 with ``Retry-After`` without looking at the secret, and the right secret works
again once the lock has passed.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from flowsched.clock import Clock
from flowsched.console.identity import Identity

__all__ = ["FREE_FAILURES", "MAX_LOCK", "Session", "Sessions", "Throttle"]

FREE_FAILURES = 5
MAX_LOCK = timedelta(minutes=2)
MAX_SESSIONS = 10_000
MAX_CLIENTS = 10_000


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in identity and when its sign-in ends."""

    identity: Identity
    expires: datetime


def _key(cookie: str) -> str:
    # Kept by the digest of the cookie: a memory dump shows no usable cookie.
    return hashlib.sha256(cookie.encode("utf-8", "replace")).hexdigest()


class Sessions:
    """Sign-ins that last ``ttl`` each, revoked by :meth:`revoke` (at most
    :data:`MAX_SESSIONS`; the oldest go first)."""

    def __init__(self, clock: Clock, ttl: timedelta) -> None:
        if ttl <= timedelta(0):
            raise ValueError(f"session ttl: {ttl} is not positive")
        self._clock = clock
        self.ttl = ttl
        self._live: OrderedDict[str, Session] = OrderedDict()

    def open(self, identity: Identity) -> str:
        """A fresh session for ``identity``: the cookie value to set."""
        cookie = secrets.token_urlsafe(32)
        self._live[_key(cookie)] = Session(identity, self._clock.now() + self.ttl)
        while len(self._live) > MAX_SESSIONS:
            self._live.popitem(last=False)
        return cookie

    def get(self, cookie: str | None) -> Session | None:
        """The live session of ``cookie``, or ``None`` (unknown, revoked, or expired)."""
        if not cookie or len(cookie) > 100:
            return None
        key = _key(cookie)
        session = self._live.get(key)
        if session is None:
            return None
        if session.expires <= self._clock.now():
            del self._live[key]
            return None
        return session

    def revoke(self, cookie: str | None) -> Session | None:
        """End the session of ``cookie`` on the server; the session it was, if live."""
        if not cookie:
            return None
        session = self.get(cookie)
        self._live.pop(_key(cookie), None)
        return session


@dataclass(slots=True)
class _Client:
    failures: int = 0
    locked_until: datetime | None = None
    lock: timedelta = timedelta(0)


class Throttle:
    """Failed sign-ins per client address, and the lock-outs they earn."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    def retry_after(self, client: str) -> int:
        """Whole seconds ``client`` must still wait before a sign-in is looked at (0: none)."""
        state = self._clients.get(client)
        if state is None or state.locked_until is None:
            return 0
        left = (state.locked_until - self._clock.now()).total_seconds()
        return max(0, math.ceil(left))

    def failed(self, client: str) -> int:
        """Count a failed sign-in; the seconds of the lock it starts (0: none yet)."""
        state = self._clients.pop(client, None) or _Client()
        self._clients[client] = state  # most recent last; the oldest are dropped first
        while len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)
        state.failures += 1
        if state.failures <= FREE_FAILURES:
            return 0
        state.lock = min(MAX_LOCK, max(timedelta(seconds=1), state.lock * 2))
        state.locked_until = self._clock.now() + state.lock
        return math.ceil(state.lock.total_seconds())

    def succeeded(self, client: str) -> None:
        """A right secret: ``client`` starts again with a clean count."""
        self._clients.pop(client, None)
