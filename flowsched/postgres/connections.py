"""Internal: where the PostgreSQL stores get their connections - a pool given or their own.

A store takes ``conninfo_or_pool``: a ``postgresql://`` URL or libpq conninfo string (the
store opens a ``psycopg_pool`` pool of its own, in autocommit, and closes it on ``close()``)
or a pool the application already has (used as it is, and left open: the application owns
it). Every operation borrows one connection for one transaction and gives it back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import conninfo as libpq_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from flowsched.errors import SchedulerUnavailable

__all__ = [
    "DEFAULT_POOL_SIZE",
    "FIRING_POOL_SIZE",
    "FIRING_SETTINGS",
    "check_conninfo",
    "describe",
    "firing_async_pool",
    "firing_options",
    "firing_pool",
    "probe_firing",
    "probe_firing_async",
    "settings_refused",
    "own_async_pool",
    "own_pool",
    "pool_errors",
    "seconds",
]

log = logging.getLogger("flowsched.postgres")

DEFAULT_POOL_SIZE = 4
"""Connections of the pool a store opens itself for the application's calls (``schedule()``,
``cancel()``, the steering calls) and the node's heartbeat."""

FIRING_POOL_SIZE = 3
"""Connections a store that opens its own pool keeps for the node's firing statements (claims,
starts, settles, renewals, releases, ``next_due``): one per lane of the node core
(:func:`flowsched.node.actions.lane`), two of them open from the node's first claim."""

FIRING_SETTINGS = {
    "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off",
    "enable_bitmapscan": "off",
}
"""The session settings of the firing connections. Each firing statement has one right plan
at any table size (an ordered scan of the claim index per route, the primary key for a batch
of ids, the history index per item): planned once per connection, not again at every claim
(the claim's custom plan cost 0.4 ms of server time a claim of 64 rows, a quarter of it), and
never a scan of the table or a bitmap of every due row, whatever the statistics said when
the plan was made (a generic plan made while the table held 10 rows would otherwise scan
200,000 rows at every claim once it held them). Only these connections carry them: the
application's calls (``timers()``'s optional filters) keep the server's own planning."""


def check_conninfo(value: object, what: str = "conninfo_or_pool") -> str:
    """``value`` if it is a non-empty connection string; ``TypeError`` naming ``what``."""
    if not isinstance(value, str) or not value.strip():
        raise TypeError(
            f"{what} must be a postgresql:// URL, a conninfo string or a psycopg_pool pool, "
            f"got {value!r:.80}"
        )
    return value


def seconds(value: timedelta | float | None, what: str) -> float | None:
    """``value`` in seconds (``None`` stays ``None``); ``ValueError`` if not positive."""
    if value is None:
        return None
    number = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if number <= 0:
        raise ValueError(f"{what} must be positive, got {value!r}")
    return number


def describe(conninfo: str) -> str:
    """``host:port/dbname`` of ``conninfo``, for messages: never the password or the user."""
    try:
        parts = libpq_conninfo.conninfo_to_dict(conninfo)
    except Exception:  # a string libpq cannot parse: name nothing of it
        return "the server given"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"{host}:{port}/{parts.get('dbname') or ''}"


def _unreachable(conninfo: str, waited: float, exc: BaseException) -> SchedulerUnavailable:
    return SchedulerUnavailable(
        f"PostgreSQL at {describe(conninfo)}: no connection within {waited:g} s "
        f"({type(exc).__name__}); is the server running and the URL right?"
    )


RECONNECT_FIRST = 0.1
RECONNECT_LONGEST = 0.25
"""A pool this adapter opens retries a lost server 0.1 s doubling, at most every 0.25 s
(psycopg_pool's own backoff is 1 s doubling without a bound short of ``reconnect_timeout``:
after a restart of a few seconds it found the server back 2-3 s late, and the node with it)."""


class _Reconnect(AttemptWithBackoff):
    """psycopg_pool's reconnection attempt with :data:`RECONNECT_FIRST` and a bound."""

    INITIAL_DELAY = RECONNECT_FIRST

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_LONGEST)


class _Pool(ConnectionPool):
    """A :class:`ConnectionPool` that reconnects by :class:`_Reconnect`."""

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _Reconnect(timeout=self.reconnect_timeout), growing)


class _AsyncPool(AsyncConnectionPool):
    """An :class:`AsyncConnectionPool` that reconnects by :class:`_Reconnect`."""

    async def _add_connection(
        self, attempt: AttemptWithBackoff | None, growing: bool = False
    ) -> None:
        attempt = attempt or _Reconnect(timeout=self.reconnect_timeout)
        await super()._add_connection(attempt, growing)


def firing_options(conninfo: str) -> str:
    """The ``options`` of ``conninfo`` (the server settings given at connection; else
    libpq's ``PGOPTIONS``, which an explicit ``options`` would replace) with
    :data:`FIRING_SETTINGS` after them (so they win)."""
    try:
        given = libpq_conninfo.conninfo_to_dict(conninfo).get("options") or ""
    except Exception:  # libpq will name what is wrong with it at the first connection
        given = ""
    given = given or os.environ.get("PGOPTIONS", "")
    ours = " ".join(f"-c {name}={value}" for name, value in FIRING_SETTINGS.items())
    return f"{given} {ours}".strip()


def _pool_arguments(
    conninfo: str, size: int, timeout: float | None, firing: bool = False
) -> dict[str, Any]:
    # What both pool classes take: closed until opened by the caller, autocommit connections.
    kwargs: dict[str, Any] = {"autocommit": True}
    if firing:
        kwargs["options"] = firing_options(conninfo)
    return {
        "conninfo": check_conninfo(conninfo),
        "kwargs": kwargs,
        "min_size": 2 if firing else 1,
        "max_size": FIRING_POOL_SIZE if firing else size,
        "open": False,
        "timeout": timeout or 30.0,
        "name": "flowsched-firing" if firing else "flowsched",
    }


_REFUSED = ("startup parameter", "unrecognized configuration parameter", "invalid value for")
"""What a connection refused for its options says: PgBouncer ("unsupported startup
parameter ..."), a server that does not know a setting or value."""


def settings_refused(conninfo: str, exc: Exception) -> None:
    """``exc`` failed a probe (:func:`probe_firing`): raise it again unless it is a refusal
    of :data:`FIRING_SETTINGS` (a pooler in between, an old server) rather than an
    unreachable server; a refusal is logged, once, and the store falls back on its pool."""
    if not any(mark in str(exc).lower() for mark in _REFUSED):
        raise exc
    log.warning(
        "PostgreSQL at %s refused the firing connections' settings (%s): the node's claims "
        "and settles run on the pool, planned by the server at every claim (slower; see the "
        "PostgreSQL guide's scaling notes)",
        describe(conninfo),
        str(exc).strip()[:200],
    )


def probe_firing(conninfo: str, timeout: float | None) -> None:
    """One connection with :data:`FIRING_SETTINGS`, closed at once: it raises what the
    server (or a pooler) says of them."""
    psycopg.connect(
        conninfo, autocommit=True, options=firing_options(conninfo), connect_timeout=_whole(timeout)
    ).close()


async def probe_firing_async(conninfo: str, timeout: float | None) -> None:
    """:func:`probe_firing` for asyncio."""
    conn = await psycopg.AsyncConnection.connect(
        conninfo, autocommit=True, options=firing_options(conninfo), connect_timeout=_whole(timeout)
    )
    await conn.close()


def _whole(timeout: float | None) -> int:
    return max(2, round(timeout or 30.0))  # libpq: whole seconds (it treats 1 as 2)


def firing_pool(conninfo: str, timeout: float | None) -> ConnectionPool:
    """The firing connections' pool (:data:`FIRING_SETTINGS`), not open yet: the store opens
    it, without waiting, at its first firing call (a store used only for the application's
    calls never connects it)."""
    return _Pool(**_pool_arguments(conninfo, 0, timeout, firing=True))


def firing_async_pool(conninfo: str, timeout: float | None) -> AsyncConnectionPool:
    """:func:`firing_pool` for asyncio."""
    return _AsyncPool(**_pool_arguments(conninfo, 0, timeout, firing=True))


def own_pool(conninfo: str, size: int, timeout: float | None) -> ConnectionPool:
    """A pool of ``size`` autocommit connections to ``conninfo`` that retries a lost server
    within :data:`RECONNECT_LONGEST`, open (and waiting for its first connection, so a server
    that cannot be reached is a :class:`~flowsched.SchedulerUnavailable` here, within
    ``timeout``, naming the host)."""
    pool: ConnectionPool = _Pool(**_pool_arguments(conninfo, size, timeout))
    try:
        pool.open(wait=True, timeout=timeout or 30.0)
    except PoolTimeout as exc:
        pool.close()
        raise _unreachable(conninfo, timeout or 30.0, exc) from None
    return pool


async def own_async_pool(conninfo: str, size: int, timeout: float | None) -> AsyncConnectionPool:
    """:func:`own_pool` for asyncio (opened in the running loop)."""
    pool: AsyncConnectionPool = _AsyncPool(**_pool_arguments(conninfo, size, timeout))
    try:
        await pool.open(wait=True, timeout=timeout or 30.0)
    except PoolTimeout as exc:
        await pool.close()
        raise _unreachable(conninfo, timeout or 30.0, exc) from None
    return pool


@contextmanager
def pool_errors(close: Callable[[], object], what: str) -> Iterator[None]:
    """Turn a pool's failure to hand out a connection into :class:`SchedulerUnavailable`
    naming ``what``: no connection within the timeout (``close`` is called first, to release
    what was prepared for it), or none could be opened at all."""
    try:
        yield
    except PoolTimeout as exc:
        close()
        raise SchedulerUnavailable(
            f"PostgreSQL: {what}: no connection within the timeout ({exc})"
        ) from exc
    except psycopg.OperationalError as exc:  # the pool could not connect at all
        raise SchedulerUnavailable(f"PostgreSQL: {what}: {exc}") from exc
