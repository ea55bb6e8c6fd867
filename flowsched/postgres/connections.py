"""Internal: where the PostgreSQL stores get their connections - a pool given or their own.

A store takes ``conninfo_or_pool``: a ``postgresql://`` URL or libpq conninfo string (the
store opens a ``psycopg_pool`` pool of its own, in autocommit, and closes it on ``close()``)
or a pool the application already has (used as it is, and left open: the application owns
it). Every operation borrows one connection for one transaction and gives it back.
"""

from __future__ import annotations

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
    "check_conninfo",
    "describe",
    "own_async_pool",
    "own_pool",
    "pool_errors",
    "seconds",
]

DEFAULT_POOL_SIZE = 4
"""Connections of a pool a store opens itself: the firing path uses one or two at a time
(claim, settle); the rest serve the application's schedule() and cancel() calls."""


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


def _pool_arguments(conninfo: str, size: int, timeout: float | None) -> dict[str, Any]:
    # What both pool classes take: closed until opened by the caller, autocommit connections.
    return {
        "conninfo": check_conninfo(conninfo),
        "kwargs": {"autocommit": True},
        "min_size": 1,
        "max_size": size,
        "open": False,
        "timeout": timeout or 30.0,
        "name": "flowsched",
    }


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
