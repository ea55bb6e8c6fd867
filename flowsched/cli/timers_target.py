"""Internal: which verbs ``flowsched timers`` runs - PostgreSQL's or MongoDB's.

A ``postgresql://`` (or ``postgres://``) ``--uri``, or no ``--uri`` and a ``--config`` file
(``$FLOWSCHED_CONFIG``) with an ``ipf-scheduler.postgres`` block, picks the verbs of
:mod:`flowsched.cli.timers_postgres` on that table (``--table``, else the file's, else
``flowsched_timers``); anything else, the MongoDB verbs of :mod:`flowsched.cli.timers_commands`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flowsched.cli._output import fail
from flowsched.cli.mongo_target import CONFIG_ENV, ConnectionGroup
from flowsched.errors import ConfigError

__all__ = ["TimersGroup", "is_postgres_uri", "take_target"]

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_uri(uri: object) -> bool:
    """Whether ``uri`` names a PostgreSQL server."""
    return isinstance(uri, str) and uri.lower().startswith(_SCHEMES)


def take_target(args: list[str]) -> tuple[str, str | None, list[str]] | None:
    """``(uri, table, the other args)`` when ``args`` give a PostgreSQL ``--uri`` (anywhere
    before ``--``), or no ``--uri`` and a ``--config`` file (or ``$FLOWSCHED_CONFIG``) with an
    ``ipf-scheduler.postgres`` block (its ``url`` and ``table``; ``--table`` wins); ``None``
    otherwise (the MongoDB verbs run, and report a bad file)."""
    uri: str | None = None
    table: str | None = None
    config: str | None = os.environ.get(CONFIG_ENV) or None
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest.extend(args[index:])
            break
        name, eq, value = arg.partition("=")
        if name == "--config":
            config = value if eq else (args[index + 1] if index + 1 < len(args) else None)
        if name in ("--uri", "--table"):
            if not eq:
                if index + 1 >= len(args):
                    rest.append(arg)
                    break
                value = args[index + 1]
                index += 1
            if name == "--uri":
                uri = value
            else:
                table = value
            index += 1
            continue
        rest.append(arg)
        index += 1
    if uri is None and config is not None:
        uri, table = _from_file(config, table)
    if not is_postgres_uri(uri):
        return None
    assert uri is not None
    return uri, table, rest


def _from_file(path: str, table: str | None) -> tuple[str | None, str | None]:
    """The ``postgres`` block's url and table of the file at ``path`` (``--table`` wins);
    ``(None, table)`` when it has none or cannot be read."""
    from flowsched.config.hocon import load_hocon
    from flowsched.config.scheduler_settings import read_scheduler_settings

    try:
        settings, problems = read_scheduler_settings(load_hocon(Path(path)))
    except (OSError, ConfigError):
        return None, table
    if problems or settings.postgres_url is None:
        return None, table
    return settings.postgres_url, table or settings.postgres_table


_VERBS = "flowsched.timers.postgres"


class TimersGroup(ConnectionGroup):
    """The ``timers`` group: with a PostgreSQL ``--uri`` its verbs are
    :class:`PostgresTimers`'; otherwise the MongoDB ones."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        found = take_target(args)
        if found is None:
            return super().parse_args(ctx, args)
        from flowsched.cli.timers_postgres import PostgresTimers

        verbs = PostgresTimers()
        verbs.uri, verbs.table, rest = found
        ctx.meta[_VERBS] = verbs.group()
        return super().parse_args(ctx, rest)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        postgres = ctx.meta.get(_VERBS)
        if postgres is None:
            return super().get_command(ctx, cmd_name)
        command = postgres.get_command(ctx, cmd_name)
        if command is None:
            verbs = ", ".join(postgres.list_commands(ctx))
            fail(f"timers {cmd_name}: not a verb on PostgreSQL (these are: {verbs})")
        return command
