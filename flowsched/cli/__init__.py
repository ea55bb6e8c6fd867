"""Internal: the ``flowsched`` command line (the command is public, this module is not).

Each verb lives in its own module with a ``register(app)`` function; a group of verbs (such as
an operators' ``timers`` group) is a ``typer.Typer`` added with
``app.add_typer(group, name="timers")``. A verb is listed in :data:`VERBS` with its module and
one line of help: the module is imported only when that verb runs (or shows its own help), so
that ``flowsched --help`` and each verb load only what they use (rich, pydantic, pyhocon and
the MongoDB driver are 0.1-0.5 s of imports). Adding a verb is one line here.
"""

from __future__ import annotations

from importlib import import_module
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

__all__ = ["VERBS", "build_app", "main"]

VERBS: dict[str, tuple[str, str]] = {
    "explain": (
        "flowsched.cli.config_commands",
        "Show each type's value for FLOW.STATE.ACTION, the key it came from, and shadowed keys.",
    ),
    "check": (
        "flowsched.cli.config_commands",
        "Validate CONF: list every error and near-miss key; exit 1 if there is any.",
    ),
    "backoff": ("flowsched.cli.backoff_command", "Preview a retry schedule."),
    "timers": (
        "flowsched.cli.timers_commands",
        "See and act on the live timers of a MongoDB collection.",
    ),
    "console": (
        "flowsched.cli.console_command",
        "Serve the operator console (a web page) over a MongoDB collection.",
    ),
    "db": (
        "flowsched.cli.db_commands",
        "Create or upgrade the PostgreSQL tables (db migrate URL [--table T]).",
    ),
    "simulate": (
        "flowsched.cli.simulate_command",
        "Run the deterministic cluster simulator over seeds; exit 1 on a broken invariant.",
    ),
}
"""Verb name → (the module whose ``register(app)`` adds it, its line in ``flowsched --help``)."""


class LazyVerbs(TyperGroup):
    """The root group: lists :data:`VERBS` from the table, imports a verb's module when used."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Every verb, in the table's order."""
        return [*self.commands, *(name for name in VERBS if name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The verb's command, its module imported (and registered) on first use."""
        if cmd_name not in self.commands and cmd_name in VERBS:
            group = typer.Typer(rich_markup_mode=None)  # plain help, as the root's
            import_module(VERBS[cmd_name][0]).register(group)
            self.commands.update(typer.main.get_group(group).commands)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The verbs and their lines from :data:`VERBS`, without importing any of them."""
        rows = [(name, VERBS[name][1]) for name in VERBS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _print_version(value: bool) -> None:
    if value:
        from flowsched import __version__

        typer.echo(f"flowsched {__version__}")
        raise typer.Exit()


def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed flowsched version and exit.",
        ),
    ] = False,
) -> None:
    """Inspect scheduling configuration and retry schedules; operate live timers."""


def build_app() -> typer.Typer:
    """The ``flowsched`` application with every verb of :data:`VERBS` (loaded when used)."""
    app = typer.Typer(
        name="flowsched",
        help="Inspect scheduling configuration and retry schedules; operate live timers.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain click messages: a usage error is a short "Error: ..." on stderr, exit 2.
        rich_markup_mode=None,
        cls=LazyVerbs,
    )
    app.callback()(_options)
    return app


def main() -> None:
    """Entry point of the ``flowsched`` console script."""
    build_app()()
