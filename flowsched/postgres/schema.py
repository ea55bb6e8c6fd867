"""Internal: the adapter's tables, created and upgraded by the library itself.

A table ``T`` (default ``flowsched_timers``) comes with ``T_dead`` (dead letters),
``T_quarantine`` (rows set aside with the reason), ``T_history`` (attempts, bounded per item),
``T_nodes`` (heartbeats), the sequence ``T_generation`` and ``T_schema``, one row holding the
schema version. The statements are ``migration_<n>`` in ``queries.sql``.

:func:`migrate_plan` brings a table to :data:`SCHEMA_VERSION`: in one transaction, under
``pg_advisory_xact_lock`` on the table's name (so nodes starting together take turns and the
later ones find the work done), it reads the version and applies each missing migration in
order. Idempotent: on an up-to-date table it changes nothing. A table migrated by a newer
flowsched (a version this one does not know) is refused with a ``RuntimeError`` naming both
versions, before anything is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowsched.postgres.plans import Plan, Statement, run, run_async
from flowsched.postgres.queries import Queries

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "drop_tables",
    "drop_tables_async",
    "migrate",
    "migrate_async",
    "migrate_plan",
]

MIGRATIONS: tuple[str, ...] = (
    "migration_1",
    "migration_2",
    "migration_3",
    "migration_4",
    "migration_5",
    "migration_6",
)
"""The migrations in order: migration ``n`` (1-based) takes a table from version ``n - 1``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this flowsched creates and understands."""


def migrate_plan(queries: Queries) -> Plan[int]:
    """Bring ``queries.table`` to :data:`SCHEMA_VERSION`; returns the version."""
    yield Statement(queries["schema_lock"], {"key": f"flowsched:{queries.table}"})
    yield Statement(queries["schema_version_table"])
    rows = yield Statement(queries["schema_version"])
    found = rows[0][0] if rows else 0
    if not isinstance(found, int):
        raise RuntimeError(f"{queries.table}_schema holds version {found!r}, not a number")
    if found > SCHEMA_VERSION:
        raise RuntimeError(
            f"table {queries.table!r} is at schema version {found}, made by a newer flowsched; "
            f"this one knows up to version {SCHEMA_VERSION}: upgrade flowsched"
        )
    for version in range(found + 1, SCHEMA_VERSION + 1):
        yield Statement(queries[MIGRATIONS[version - 1]])
    if found < SCHEMA_VERSION:
        yield Statement(queries["schema_set_version"], {"version": SCHEMA_VERSION})
    return SCHEMA_VERSION


def migrate(conn: Connection[Any], table: str) -> int:
    """Create or upgrade ``table`` and its companions on ``conn``; returns the version."""
    return run(conn, migrate_plan(Queries(table)), what=f"migrate {table}", write=True, atomic=True)


async def migrate_async(conn: AsyncConnection[Any], table: str) -> int:
    """:func:`migrate` on an asyncio connection."""
    plan = migrate_plan(Queries(table))
    return await run_async(conn, plan, what=f"migrate {table}", write=True, atomic=True)


def _drop_plan(queries: Queries) -> Plan[None]:
    yield Statement(queries["drop_tables"])
    return None


def drop_tables(conn: Connection[Any], table: str) -> None:
    """Drop ``table`` and every companion of it (for test kits: irreversible)."""
    run(conn, _drop_plan(Queries(table)), what=f"drop {table}", write=True)


async def drop_tables_async(conn: AsyncConnection[Any], table: str) -> None:
    """:func:`drop_tables` on an asyncio connection."""
    await run_async(conn, _drop_plan(Queries(table)), what=f"drop {table}", write=True)
