"""Internal: the console's audit on PostgreSQL - ``<table>_audit``, beside the timers.

The console over a PostgreSQL table (``flowsched console --uri postgresql://...``) keeps its
audit where the timers are, as the MongoDB console keeps it in ``<collection>_audit``: it
outlives the console's process, and every console on the table lists the same entries. The
table is made on the first entry (``audit_table`` in ``queries.sql``; a table whose console
never acted has none, and listing it lists nothing). An entry's fields are
:func:`~flowsched.console.audit.entry`'s; read back, ``_id`` is the row's ``seq`` (the
page cursor's tie-breaker) and a field the entry did not have is absent, as on MongoDB.

The calls run on the store's connection pool in a worker thread (the console is asyncio, the
pool is psycopg's synchronous one), each bounded by the store's ``op_timeout``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime
from typing import Any

import anyio.to_thread
from psycopg import errors

from flowsched.console.audit import AUDIT_LIMIT, AuditQuery
from flowsched.console.queries import BadQuery
from flowsched.postgres.queries import Queries
from flowsched.postgres.store import PostgresTimerStore

__all__ = ["PostgresAudit"]

_COLUMNS = ("seq", "at", "who", "role", "client", "action", "item_id", "ids", "count", "what",
            "done", "outcome")  # fmt: skip
_OPTIONAL = ("ids", "count", "what")
"""Fields an entry has only when given (as :func:`~flowsched.console.audit.entry` makes it)."""


class PostgresAudit:
    """The audit in ``<table>_audit`` of ``store``'s database."""

    def __init__(self, store: PostgresTimerStore) -> None:
        self._store = store
        self._queries = Queries(store.table)
        self._made = False

    def _timeout(self) -> float | None:
        budget = self._store.op_timeout
        return None if budget is None else budget.total_seconds()

    def _execute(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._store.pool.connection(timeout=self._timeout()) as conn:
            cursor = conn.execute(self._queries[name], params)
            return cursor.fetchall() if cursor.description is not None else []

    def _record(self, record: Mapping[str, Any]) -> None:
        if not self._made:
            # Another console may make it at the same moment.
            with suppress(errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject):
                self._execute("audit_table")
            self._made = True
        params = {name: record.get(name) for name in _COLUMNS[1:]}
        self._execute("audit_insert", params)

    async def record(self, record: Mapping[str, Any]) -> None:
        """Store ``record`` (one insert; the first one makes the table)."""
        await anyio.to_thread.run_sync(self._record, record)

    def _find(self, query: AuditQuery) -> list[Any]:
        at: datetime | None = None
        seq: int | None = None
        position = query.position()
        if position is not None:
            at, key = position
            if not isinstance(key, int) or isinstance(key, bool):
                raise BadQuery("after: not a cursor from the audit page's 'next' link")
            seq = key
        params = {
            "who": query.who,
            "action": query.action,
            "done": None if query.outcome is None else query.outcome == "done",
            "item_id": query.item_id,
            "since": query.since,
            "until": query.until,
            "at": at,
            "seq": seq,
            "limit": query.limit,
        }
        try:
            rows = self._execute("audit_find", params)
        except errors.UndefinedTable:
            return []  # no console has acted on this table yet
        return [_entry(row) for row in rows]

    async def find(self, query: AuditQuery) -> list[Any]:
        """One page of entries, newest first."""
        return await anyio.to_thread.run_sync(self._find, query)

    async def of_item(self, item_id: str) -> list[Any]:
        """The newest entries naming ``item_id``."""
        return await self.find(AuditQuery(item_id=item_id, limit=AUDIT_LIMIT))


def _entry(row: tuple[Any, ...]) -> dict[str, Any]:
    record = dict(zip(_COLUMNS, row, strict=True))
    record["_id"] = record.pop("seq")
    for name in _OPTIONAL:
        if record[name] is None:
            del record[name]
    return record
