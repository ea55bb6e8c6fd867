"""Internal: ``flowsched timers list``, read with ``timers()``'s own query.

The rows come from :func:`flowsched.mongo.timer_query.document_page_steps` - the query
``MongoScheduler.timers()`` runs: the same filters, the same ``(due, _id)`` order and index,
the same keyset cursor - read as documents, so that a malformed one is still shown (with
the reason) rather than left out. What the CLI adds: the total (one count), ``--page N``
(N keyset pages walked, no skip), ``--after ID`` (the cursor of that timer, and one count
for where the page starts) and ``--overdue`` (due before now, not paused, and no node
delivering it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flowsched.cli import timers_render as render
from flowsched.cli._output import fail, kind_option
from flowsched.cli.timers_commands import (
    EXIT_NOT_FOUND,
    FlowOption,
    JsonOption,
    KindOption,
    _echo_json,
)
from flowsched.cli.timers_paging import AfterOption, LimitOption, PageOption, Paging
from flowsched.steering import TimerState
from flowsched.steering_query import TimerFilters

if TYPE_CHECKING:
    from flowsched.cli.timers_commands import TimersCli
    from flowsched.mongo.inspection import Page
    from flowsched.mongo.store import TimerStore

__all__ = ["list_command", "list_page"]

OverdueOption = Annotated[
    bool, typer.Option("--overdue", help="Only due before now and not being delivered.")
]
StateOption = Annotated[
    str | None, typer.Option("--state", metavar="STATE", help="Only scheduled, claimed or paused.")
]


def list_command(cli: TimersCli) -> Callable[..., None]:
    """The ``list`` verb of ``cli``."""

    def list_timers(
        kind: KindOption = None,
        flow: FlowOption = None,
        overdue: OverdueOption = False,
        state: StateOption = None,
        limit: LimitOption = 50,
        page: PageOption = None,
        after: AfterOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """List timers, soonest due first (as MongoScheduler.timers() reads them); overdue
        and paused ones are marked."""
        paging = Paging.of(limit, page, after)
        now = cli._clock.now()
        filters = TimerFilters(
            kind=kind_option(kind), flow_id=flow, state=_state(state), limit=limit
        )
        with cli._session() as (target, store):
            found = list_page(store, filters, paging.number, after, now if overdue else None)
        if found is None:
            fail(
                f"--after {after}: no such id any more (fired or removed?); use --page",
                EXIT_NOT_FOUND,
            )
        if as_json:
            rows = [render.timer_json(doc, now) for doc in found.documents]
            _echo_json({**paging.as_json(found), "now": render.iso(now), "timers": rows})
            return
        title = f"timers in {target.namespace} at {target.shown}"
        paging.print(title, render.timers_table(found.documents, now), found, "timers")

    return list_timers


def list_page(
    store: TimerStore,
    filters: TimerFilters,
    number: int | None,
    after: str | None,
    overdue_at: datetime | None = None,
) -> Page | None:
    """Page ``number`` (from 1) of ``filters``, or the page after timer ``after`` (``None``
    if no timer has that id); only timers overdue at ``overdue_at`` if it is given."""
    from flowsched.mongo.documents import bson_utc_or_none
    from flowsched.mongo.inspection import Page, overdue_query
    from flowsched.mongo.timer_query import document_page_steps, timer_query

    extra = None if overdue_at is None else {**overdue_query(overdue_at), "paused": {"$ne": True}}
    query = _with(timer_query(filters), extra)
    total = int(store.items.count_documents(query))
    if after is not None:
        found = store.items.find_one({"_id": after}, {"due": 1})
        due = None if found is None else bson_utc_or_none(found.get("due"))
        if due is None:
            return None
        before = {"$or": [{"due": {"$lt": due}}, {"due": due, "_id": {"$lte": after}}]}
        shown = int(store.items.count_documents({"$and": [query, before]}))
        cursored = replace(filters, after=(due, after))
        documents, _ = store.run(document_page_steps(cursored, extra))
        return Page(documents, total, shown + 1)
    page, cursor = 1, None
    while True:
        current = filters if cursor is None else filters.following(cursor)
        documents, cursor = store.run(document_page_steps(current, extra))
        if page == (number or 1):
            return Page(documents, total, (page - 1) * filters.limit + 1)
        if cursor is None:  # past the end
            return Page([], total, page * filters.limit + 1)
        page += 1


def _with(query: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    return {"$and": [query, extra]} if extra else query


def _state(value: str | None) -> TimerState | None:
    if value is None:
        return None
    states: tuple[TimerState, ...] = ("scheduled", "claimed", "paused")
    for state in states:
        if value.lower() == state:
            return state
    fail(f"--state {value!r}: not one of scheduled, claimed, paused (dead letters: dead-letters)")
