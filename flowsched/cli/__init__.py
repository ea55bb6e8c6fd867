"""Internal: the ``flowsched`` command line (the command is public, this module is not).

Each verb lives in its own module with a ``register(app)`` function; a group of verbs (such as
an operators' ``timers`` group) is a ``typer.Typer`` added with
``app.add_typer(group, name="timers")`` in :func:`build_app`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from flowsched.cli import backoff_command, config_commands, simulate_command, timers_commands

__all__ = ["build_app", "main"]


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
    """The ``flowsched`` application with every verb registered."""
    app = typer.Typer(
        name="flowsched",
        help="Inspect scheduling configuration and retry schedules; operate live timers.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain click messages: a usage error is a short "Error: ..." on stderr, exit 2.
        rich_markup_mode=None,
    )
    app.callback()(_options)
    config_commands.register(app)
    backoff_command.register(app)
    timers_commands.register(app)
    simulate_command.register(app)
    return app


def main() -> None:
    """Entry point of the ``flowsched`` console script."""
    build_app()()
