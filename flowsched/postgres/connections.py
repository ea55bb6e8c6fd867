"""Internal: where the PostgreSQL stores get their connections - a pool given or their own.

A store takes ``conninfo_or_pool``: a ``postgresql://`` URL or libpq conninfo string (the
store opens a ``psycopg_pool`` pool of its own, in autocommit, and closes it on ``close()``)
or a pool the application already has (used as it is, and left open: the application owns
it). Every operation borrows one connection for one transaction and gives it back.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["DEFAULT_POOL_SIZE", "check_conninfo", "own_async_pool", "own_pool", "seconds"]

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


def _kwargs() -> dict[str, Any]:
    return {"autocommit": True}


def own_pool(conninfo: str, size: int, timeout: float | None) -> ConnectionPool:
    """A pool of ``size`` autocommit connections to ``conninfo``, open (and waiting for its
    first connection, so a wrong URL fails here, naming the server's answer)."""
    pool: ConnectionPool = ConnectionPool(
        check_conninfo(conninfo),
        kwargs=_kwargs(),
        min_size=1,
        max_size=size,
        open=False,
        timeout=timeout or 30.0,
        name="flowsched",
    )
    pool.open(wait=True, timeout=timeout or 30.0)
    return pool


async def own_async_pool(conninfo: str, size: int, timeout: float | None) -> AsyncConnectionPool:
    """:func:`own_pool` for asyncio (opened in the running loop)."""
    pool: AsyncConnectionPool = AsyncConnectionPool(
        check_conninfo(conninfo),
        kwargs=_kwargs(),
        min_size=1,
        max_size=size,
        open=False,
        timeout=timeout or 30.0,
        name="flowsched",
    )
    await pool.open(wait=True, timeout=timeout or 30.0)
    return pool
