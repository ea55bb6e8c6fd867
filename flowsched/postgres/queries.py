"""Internal: the SQL statements of the PostgreSQL adapter, named, for one table.

Every statement lives in ``queries.sql`` beside this module, under a ``-- name:`` line (the
way procrastinate keeps its ``queries.sql``): one file to read for everything the adapter
asks of the server. :class:`Queries` loads it once and fills in the table's names; a table
name is checked first (:func:`check_table_name`), so nothing a user passes is ever spliced
into SQL unchecked.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files
from typing import LiteralString

__all__ = ["MAX_TABLE_NAME", "Queries", "check_table_name", "statement_names"]

MAX_TABLE_NAME = 48
"""Longest table name: PostgreSQL keeps 63 bytes of an identifier, and the adapter's own
tables and indexes add a suffix of up to 15 (``_history_ended``)."""

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*\Z")
_NAME_LINE = re.compile(r"^-- name: ([a-z_0-9]+)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_FRAGMENT = "fragment_"
"""A ``-- name: fragment_x`` block is not a statement: it is the text of ``{x}`` in those
that follow (filled in first; one copy of SQL two statements share)."""

NOW = "coalesce(%(now)s::timestamptz, statement_timestamp())"
"""The store's clock in SQL: the ``now`` parameter when a ``clock=`` was given, else the
server's time at the start of the statement (one value for the whole statement)."""


RELAXED = (
    "(SELECT set_config('synchronous_commit', coalesce(%(firing_commit)s::text, "
    "current_setting('synchronous_commit')), true)) IS NOT NULL"
)
"""A condition of the firing path's writes: true, and (``firing_commit`` = ``'off'``) their
transaction commits without waiting for the WAL flush (the setting is transaction-local)."""


def check_table_name(table: object, what: str = "table") -> str:
    """``table`` if it is a usable table name: lower-case letters, digits and underscores,
    not starting with a digit, at most :data:`MAX_TABLE_NAME` characters; else
    ``ValueError`` naming ``what`` and the rule.

    >>> check_table_name("flowsched_timers")
    'flowsched_timers'
    """
    if not isinstance(table, str) or not _IDENTIFIER.match(table):
        raise ValueError(
            f"{what} must be a lower-case SQL identifier (letters a-z, digits, _; not "
            f"starting with a digit), got {table!r}"
        )
    if len(table) > MAX_TABLE_NAME:
        raise ValueError(
            f"{what} {table!r} is {len(table)} characters; the limit is {MAX_TABLE_NAME} "
            "(PostgreSQL keeps 63, and the adapter adds suffixes)"
        )
    return table


@lru_cache(maxsize=1)
def _statements() -> dict[str, str]:
    text = (files("flowsched.postgres") / "queries.sql").read_text(encoding="utf-8")
    parts = _NAME_LINE.split(text)
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        # Comment lines are the statement's documentation, not sent: psycopg would read a
        # %(name)s written in a comment as a placeholder.
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statements[name] = "\n".join(lines).strip()
    return statements


def statement_names() -> list[str]:
    """The names of every statement in ``queries.sql``, in file order (not its fragments)."""
    return [name for name in _statements() if not name.startswith(_FRAGMENT)]


def _names(table: str) -> dict[str, str]:
    def quoted(name: str) -> str:
        return f'"{name}"'

    return {
        "table": quoted(table),
        "dead": quoted(f"{table}_dead"),
        "quarantine": quoted(f"{table}_quarantine"),
        "history": quoted(f"{table}_history"),
        "nodes": quoted(f"{table}_nodes"),
        "schema": quoted(f"{table}_schema"),
        "generations": quoted(f"{table}_generation"),
        "table_claim": quoted(f"{table}_claim"),
        "table_held": quoted(f"{table}_held"),
        "table_flow": quoted(f"{table}_flow"),
        "table_due": quoted(f"{table}_due"),
        "dead_at": quoted(f"{table}_dead_at"),
        "history_item": quoted(f"{table}_history_item"),
        "history_ended": quoted(f"{table}_history_ended"),
        "history_kept": quoted(f"{table}_history_kept"),
        "audit": quoted(f"{table}_audit"),
        "audit_at": quoted(f"{table}_audit_at"),
        "audit_item": quoted(f"{table}_audit_item"),
        "audit_ids": quoted(f"{table}_audit_ids"),
        "now": NOW,
        "relaxed": RELAXED,
    }


class Queries:
    """The statements of ``queries.sql`` with the names of ``table``'s tables filled in.

    ``queries["claim_due"]`` is the claim statement for that table; a name that is not in
    the file is a ``KeyError`` naming it.
    """

    __slots__ = ("_rendered", "table")

    def __init__(self, table: str) -> None:
        self.table = check_table_name(table)
        names = _names(self.table)
        self._rendered: dict[str, str] = {}
        for name, sql in _statements().items():
            text = _PLACEHOLDER.sub(lambda match: names[match.group(1)], sql)
            if name.startswith(_FRAGMENT):
                names[name.removeprefix(_FRAGMENT)] = text
            else:
                self._rendered[name] = text

    def __getitem__(self, name: str) -> LiteralString:
        try:
            sql = self._rendered[name]
        except KeyError:
            raise KeyError(f"no statement named {name!r} in queries.sql") from None
        # Built from the package's own file and a checked identifier only (mypy reads
        # LiteralString as str; the annotation says what the value is).
        return sql

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of this table's timers."""
        return f"{self.table}_due"
