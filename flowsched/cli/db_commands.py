"""Internal: ``flowsched db migrate URL [--table T]`` - create or upgrade the PostgreSQL
tables by hand (nodes do it themselves when they start; this is for a deployment step or a
database role that nodes run without DDL rights)."""

from __future__ import annotations

from typing import Annotated

import typer

from flowsched.cli._output import EXIT_INVALID, fail

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``db`` group to ``app``."""
    group = typer.Typer(
        help="Manage the database tables of the PostgreSQL adapter.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    group.command()(migrate)
    app.add_typer(group, name="db")


def migrate(
    url: Annotated[str, typer.Argument(metavar="URL", help="A postgresql:// URL.")],
    table: Annotated[
        str, typer.Option("--table", help="The timers table (its companions follow).")
    ] = "flowsched_timers",
) -> None:
    """Create or upgrade TABLE and its companions; print the schema version. Idempotent and
    safe beside running nodes (an advisory lock serialises migrations)."""
    if not url.startswith(("postgresql://", "postgres://")):
        fail(f"URL must be a postgresql:// URL, got {url!r}")
    try:
        import psycopg

        from flowsched.postgres.queries import check_table_name
        from flowsched.postgres.schema import migrate as run_migration
    except ImportError as exc:
        fail(f"flowsched db migrate needs psycopg: pip install 'flowsched[postgres]' ({exc})")
    try:
        check_table_name(table, "--table")
    except ValueError as exc:
        fail(str(exc))
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            version = run_migration(conn, table)
    except (psycopg.Error, RuntimeError) as exc:
        fail(f"migrate {table}: {exc}", EXIT_INVALID)
    typer.echo(f"{table}: schema version {version}")
