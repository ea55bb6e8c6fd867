"""Internal: operations written once, run by a synchronous or an asyncio connection.

An operation of the adapter is a *plan*: a generator that yields :class:`Statement`\\ s and
receives each one's rows, and returns its result. It does no I/O itself (the sans-I/O shape
of h11 and procrastinate's manager): :func:`run` sends it over a psycopg ``Connection``,
:func:`run_async` over an ``AsyncConnection`` (in one transaction when the plan needs it).
So the two faces share every statement, parameter and decoding, and differ only in how
they wait.

Errors become the port's: :class:`~flowsched.SchedulerUnavailable` when nothing was sent or
nothing applied (no connection in time, a read that failed), :class:`~flowsched.OutcomeUnknown`
when a write's statement was sent and the connection broke before its reply.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, LiteralString, TypeVar

import psycopg
from psycopg.pq import ExecStatus

from flowsched.errors import OutcomeUnknown, SchedulerUnavailable

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection
    from psycopg.pq.abc import PGresult

__all__ = ["Answered", "Plan", "Row", "Statement", "ahead", "outage", "run", "run_async"]

T = TypeVar("T")

Row = tuple[object, ...]
"""One row as psycopg returns it; plans check each value's type before using it."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement to send: its SQL (from ``queries.sql``) and its parameters."""

    sql: LiteralString
    params: Mapping[str, Any] | None = None


Plan = Generator[Statement, list[Row], T]
"""An operation: yields statements, is sent each one's rows, returns its result."""

_BROKEN = (psycopg.OperationalError, psycopg.InterfaceError)


def outage(exc: BaseException, *, what: str, sent: bool, write: bool) -> SchedulerUnavailable:
    """The port's error for a database error ``exc`` met while doing ``what``."""
    if sent and write:
        return OutcomeUnknown(
            f"PostgreSQL: {what}: the connection failed after the write was sent "
            f"({type(exc).__name__}: {exc}); it may or may not have taken effect"
        )
    return SchedulerUnavailable(f"PostgreSQL: {what}: {type(exc).__name__}: {exc}")


@dataclass(frozen=True, slots=True)
class Answered(Generic[T]):
    """A plan's result (returned by :func:`ahead` when the plan needs no statement)."""

    value: T


def _step(plan: Plan[T], rows: list[Row] | None) -> Statement | Answered[T]:
    # The next statement, or the plan's result. StopIteration is caught here, inside the
    # transaction's block, which must see no exception when the plan ends normally.
    try:
        return next(plan) if rows is None else plan.send(rows)
    except StopIteration as stop:
        return Answered(stop.value)


def ahead(plan: Plan[T]) -> Answered[T] | Plan[T]:
    """``plan`` run up to its first statement, before any connection is taken: its result
    if it sends none (an id no item can have is "not there" without a round trip), else a
    plan that sends that statement first, then the rest of ``plan``."""
    step = _step(plan, None)
    return step if isinstance(step, Answered) else _resumed(step, plan)


def _resumed(step: Statement | Answered[T], plan: Plan[T]) -> Plan[T]:
    try:
        while isinstance(step, Statement):
            step = _step(plan, (yield step))
        return step.value
    finally:
        plan.close()  # closed with this one once it has run (else the caller closes ``plan``)


_RESULT_SETS = frozenset(
    status
    for status in (
        ExecStatus.TUPLES_OK,
        ExecStatus.SINGLE_TUPLE,
        getattr(ExecStatus, "TUPLES_CHUNK", 0),
    )
    if status
)


def _has_rows(result: PGresult | None) -> bool:
    """Whether a statement's ``result`` is a result set (``cursor.description is not None``,
    without building the description's columns: once per statement of the firing path)."""
    if not result:
        return False
    return result.nfields > 0 or result.status in _RESULT_SETS


_CURSOR = "_flowsched_cursor"
"""The attribute of a connection holding the plans' cursor on it (see :func:`_cursor`)."""


def _cursor(conn: Any) -> Any:
    """The cursor the plans use on ``conn``: one per connection, made at its first statement
    and used for each after (``conn.execute`` makes one per statement, with its adapters'
    lookups for the parameters and the columns: ~30 us of every statement on the firing
    path). Kept on the connection, so it goes with it; the same cursor ``conn.execute``
    would make (``conn.cursor()``), and a statement on it is the same statement."""
    cursor = getattr(conn, _CURSOR, None)
    if cursor is None or cursor.closed:
        cursor = conn.cursor()
        with contextlib.suppress(AttributeError):  # a connection that keeps no attribute
            setattr(conn, _CURSOR, cursor)
    return cursor


def _sync_steps(conn: Connection[Any], plan: Plan[T]) -> T:
    step = _step(plan, None)
    cursor = _cursor(conn)
    while isinstance(step, Statement):
        cursor.execute(step.sql, step.params)
        rows: list[Row] = cursor.fetchall() if _has_rows(cursor.pgresult) else []
        step = _step(plan, rows)
    return step.value


async def _async_steps(conn: AsyncConnection[Any], plan: Plan[T]) -> T:
    step = _step(plan, None)
    cursor = _cursor(conn)
    while isinstance(step, Statement):
        await cursor.execute(step.sql, step.params)
        rows: list[Row] = await cursor.fetchall() if _has_rows(cursor.pgresult) else []
        step = _step(plan, rows)
    return step.value


def run(conn: Connection[Any], plan: Plan[T], *, what: str, write: bool, atomic: bool = False) -> T:
    """Run ``plan`` on ``conn``; its result. ``atomic``: in one transaction (a plan whose
    statements must apply together, or that holds a transaction-scoped lock); otherwise
    each statement is its own transaction (one round trip each: no BEGIN, no COMMIT) and
    the plan's later statements are fenced on their own."""
    try:
        if atomic:
            with conn.transaction():
                return _sync_steps(conn, plan)
        return _sync_steps(conn, plan)
    except _BROKEN as exc:
        raise outage(exc, what=what, sent=True, write=write) from exc


async def run_async(
    conn: AsyncConnection[Any], plan: Plan[T], *, what: str, write: bool, atomic: bool = False
) -> T:
    """:func:`run` on an asyncio connection."""
    try:
        if atomic:
            async with conn.transaction():
                return await _async_steps(conn, plan)
        return await _async_steps(conn, plan)
    except _BROKEN as exc:
        raise outage(exc, what=what, sent=True, write=write) from exc
