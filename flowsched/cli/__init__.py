"""The ``flowsched`` command.

Each verb lives in its own module with a ``register(app)`` function; a group of verbs (such as
an operators' ``timers`` group) is a ``typer.Typer`` added with
``app.add_typer(group, name="timers")`` in :func:`build_app`.
"""

from __future__ import annotations

import typer

from flowsched.cli import backoff_command, config_commands, timers_commands

__all__ = ["build_app", "main"]


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
    config_commands.register(app)
    backoff_command.register(app)
    timers_commands.register(app)
    return app


def main() -> None:
    """Entry point of the ``flowsched`` console script."""
    build_app()()
