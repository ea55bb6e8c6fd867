"""Internal: ``flowsched timers pause ID`` and ``flowsched timers resume ID``.

Both go through :class:`~flowsched.mongo.MongoScheduler` (``pause`` / ``resume``), so the
CLI changes a timer exactly as a program would: a paused timer fires nothing on any node
until resumed (a delivery already running may finish); resumed, a one-shot timer whose due
time passed is due now and a recurring one goes on at its next slot.

Exit codes: 0 done, 1 no such timer, 2 usage or connection problem.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from flowsched.cli import timers_render as render
from flowsched.cli.timers_commands import _no_timer
from flowsched.mongo.documents import bson_utc_or_none

if TYPE_CHECKING:
    from flowsched.cli.timers_commands import TimersCli

__all__ = ["pause_command", "resume_command"]

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")]


def pause_command(cli: TimersCli) -> Callable[[str], None]:
    """The ``pause`` verb of ``cli``."""

    def pause(item_id: IdArg) -> None:
        """Pause a timer: it fires nothing, on any node, until `timers resume`; exit 1 if
        there is none. A delivery already running may finish; the timer stays paused."""
        with cli._session() as (target, store):
            if not cli._scheduler(store, target).pause(item_id):
                _no_timer(item_id, target, store)
        typer.echo(f"paused {item_id}: it fires nothing until `flowsched timers resume {item_id}`")

    return pause


def resume_command(cli: TimersCli) -> Callable[[str], None]:
    """The ``resume`` verb of ``cli``."""

    def resume(item_id: IdArg) -> None:
        """Resume a paused timer: a one-shot timer whose due time passed is due now, a
        recurring one goes on at its next slot (missed ones are not replayed); exit 1 if
        there is none."""
        with cli._session() as (target, store):
            if not cli._scheduler(store, target).resume(item_id):
                _no_timer(item_id, target, store)
            document = store.find(item_id)
        due = None if document is None else bson_utc_or_none(document.get("due"))
        typer.echo(f"resumed {item_id}: due {render.iso(due)}")

    return resume
