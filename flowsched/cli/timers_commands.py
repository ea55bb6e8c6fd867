"""Internal: ``flowsched timers ...`` — see and act on the live timers of a MongoDB collection.

Reading uses the scheduler's document model (:mod:`flowsched.mongo.inspection`); ``list`` runs
``MongoScheduler.timers()``' query (:mod:`~flowsched.cli.timers_listing`). ``cancel``,
``requeue``, ``pause`` and ``resume`` (:mod:`~flowsched.cli.timers_steering`) go through
:class:`~flowsched.mongo.MongoScheduler` itself, so an operator's action is fenced exactly
like a program's: a delivery already running may finish, but its outcome is never written
over what the operator did.

Exit codes: 0 done, 1 no such timer / dead letter, 2 usage or connection problem.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from flowsched.cli import quarantine_render
from flowsched.cli import timers_render as render
from flowsched.cli._output import fail, kind_option
from flowsched.cli.history_render import show_json, show_text
from flowsched.cli.mongo_target import (
    CollectionOption,
    ConfigOption,
    Connect,
    Connection,
    DbOption,
    MongoTarget,
    TimeoutOption,
    UriOption,
    connect_pymongo,
    reporting,
)
from flowsched.cli.timers_paging import AfterOption, LimitOption, PageOption, Paging
from flowsched.clock import Clock, SystemClock
from flowsched.mongo import MongoScheduler
from flowsched.mongo.documents import MAX_BUCKETS, MalformedDocument
from flowsched.mongo.inspection import Pager, TimerFilter, claim_of, collect_stats

if TYPE_CHECKING:
    from flowsched.mongo.store import TimerStore

__all__ = ["TimersCli", "register"]

EXIT_NOT_FOUND = 1
_CONNECTION_HELP = (
    "Connection options (--config, --uri, --db, --collection, --timeout) may follow the verb: "
    "see flowsched timers --help."
)

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
KindOption = Annotated[
    str | None,
    typer.Option("--kind", metavar="KIND", help="Only this kind (TIMER, ACTION_TIMEOUT, ...)."),
]
FlowOption = Annotated[
    str | None, typer.Option("--flow", metavar="FLOW_ID", help="Only this flow instance id.")
]


def register(app: typer.Typer) -> None:
    """Add the ``timers`` group to ``app``."""
    app.add_typer(TimersCli().app(), name="timers")


class TimersCli:
    """The ``timers`` verbs, on a database opened by ``connect`` and with ``clock``'s now."""

    def __init__(self, connect: Connect = connect_pymongo, clock: Clock | None = None) -> None:
        self._connect = connect
        self._clock: Clock = clock or SystemClock()
        self._connection = Connection()

    def app(self) -> typer.Typer:
        """A ``typer.Typer`` with every verb."""
        from flowsched.cli.timers_target import TimersGroup

        app = typer.Typer(
            help="See and act on the live timers of a MongoDB collection (or, with a "
            "postgresql:// --uri, of a PostgreSQL table: --table NAME).\n\n"
            "The connection options serve every verb, before it or after it: "
            "flowsched timers --config application.conf list, flowsched timers list --db ipf.",
            no_args_is_help=True,
            rich_markup_mode=None,
            cls=TimersGroup,  # a postgresql:// --uri: cli/timers_target.py
        )
        from flowsched.cli.timers_listing import list_command  # they use this module's names
        from flowsched.cli.timers_steering import pause_command, resume_command

        app.callback()(self.connection)
        app.command("list", epilog=_CONNECTION_HELP)(list_command(self))
        app.command("show", epilog=_CONNECTION_HELP)(self.show)
        app.command("cancel", epilog=_CONNECTION_HELP)(self.cancel)
        app.command("dead-letters", epilog=_CONNECTION_HELP)(self.dead_letters)
        app.command("requeue", epilog=_CONNECTION_HELP)(self.requeue)
        app.command("quarantined", epilog=_CONNECTION_HELP)(self.quarantined)
        app.command("stats", epilog=_CONNECTION_HELP)(self.stats)
        app.command("nodes", epilog=_CONNECTION_HELP)(self.nodes)
        app.command("migrate", epilog=_CONNECTION_HELP)(self.migrate)
        app.command("pause", epilog=_CONNECTION_HELP)(pause_command(self))
        app.command("resume", epilog=_CONNECTION_HELP)(resume_command(self))
        return app

    def connection(
        self,
        config: ConfigOption = None,
        uri: UriOption = None,
        db: DbOption = None,
        collection: CollectionOption = None,
        timeout: TimeoutOption = None,
    ) -> None:
        """See and act on the live timers of a MongoDB collection."""
        # Runs before the verb, once per invocation: the verb reads it through _session.
        self._connection = Connection(config, uri, db, collection, timeout)

    def show(
        self,
        item_id: IdArg,
        as_json: JsonOption = False,
    ) -> None:
        """Every field of one timer (payload, generation and key, claim, last error) and its
        delivery history: the recent attempts, also once the timer is gone."""
        now = self._clock.now()
        with self._session() as (target, store):
            document = store.find(item_id)
            from flowsched.mongo.history import MongoHistory  # needs the driver

            attempts = MongoHistory(self._clock.now, "cli").read(store, item_id)
            if document is None and not attempts:
                _no_timer(item_id, target, store)
        if as_json:
            _echo_json(show_json(item_id, document, attempts, now))
        else:
            show_text(f"{item_id} in {target.namespace} at {target.shown}", document, attempts, now)

    def cancel(
        self,
        item_id: Annotated[
            str | None, typer.Argument(metavar="[ID]", help="The timer's id.", show_default=False)
        ] = None,
        flow: Annotated[
            str | None,
            typer.Option(
                "--flow",
                metavar="FLOW_ID",
                help="Cancel every timer of this flow instance instead (as "
                "MongoScheduler.cancel_flow does).",
            ),
        ] = None,
    ) -> None:
        """Cancel a timer (as MongoScheduler.cancel does); exit 1 if there is none.

        A flow's own timer (an action timeout or retry, a processing-time deadline) is what
        moves its instance on: cancelled, the instance waits in its state for ever, and the
        command warns; --flow FLOW_ID cancels all of that instance's timers."""
        if (item_id is None) == (flow is None):
            fail("give a timer ID or --flow FLOW_ID (one of them)")
        now = self._clock.now()
        if flow is not None:
            with self._session() as (target, store):
                removed = self._scheduler(store, target).cancel_flow(flow)
            if not removed:
                fail(f"no timer of flow instance {flow} in {target.namespace}", EXIT_NOT_FOUND)
            typer.echo(f"cancelled {removed} timer(s) of flow instance {flow}")
            _warn(
                f"flow instance {flow} has no timer left: it stays in its state until an "
                "event moves it on"
            )
            return
        assert item_id is not None
        with self._session() as (target, store):
            document = store.find(item_id)
            if not self._scheduler(store, target).cancel(item_id):
                _no_timer(item_id, target, store)
        typer.echo(f"cancelled {item_id}{_cancel_note(document, now)}")
        waiting = _flow_waiting_on(document)
        if waiting is not None:
            flow_name, flow_id = waiting
            _warn(
                f"{item_id} was a timer of flow {flow_name}, instance {flow_id}: that instance "
                "now waits in its state for ever unless an event moves it on. To stop all of "
                f"its timers: flowsched timers cancel --flow {flow_id}"
            )

    def dead_letters(
        self,
        kind: KindOption = None,
        flow: FlowOption = None,
        limit: LimitOption = 50,
        page: PageOption = None,
        after: AfterOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """List dead letters (items that failed max_attempts times), oldest first."""
        paging = Paging.of(limit, page, after)
        wanted = TimerFilter(kind_option(kind), flow).query()
        with self._session() as (target, store):
            result = paging.fetch(Pager(store.dead, "dead_at"), wanted)
        if as_json:
            rows = [render.dead_letter_json(doc) for doc in result.documents]
            _echo_json({**paging.as_json(result), "dead_letters": rows})
            return
        title = f"dead letters in {target.namespace}_dead at {target.shown}"
        paging.print(title, render.dead_letters_table(result.documents), result, "dead letters")

    def quarantined(
        self,
        limit: LimitOption = 50,
        page: PageOption = None,
        after: AfterOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """List documents moved aside as unusable (malformed, poison), oldest first."""
        paging = Paging.of(limit, page, after)
        with self._session() as (target, store):
            result = paging.fetch(Pager(store.quarantine, "quarantined_at"), {})
        if as_json:
            rows = [quarantine_render.quarantine_json(doc) for doc in result.documents]
            _echo_json({**paging.as_json(result), "quarantined": rows})
            return
        title = f"quarantined documents in {target.namespace}_quarantine at {target.shown}"
        table = quarantine_render.quarantine_table(result.documents)
        paging.print(title, table, result, "quarantined documents")

    def requeue(
        self,
        item_id: IdArg,
        at: Annotated[
            str | None,
            typer.Option("--at", metavar="ISO", help="When it is due (no offset: UTC) [now]."),
        ] = None,
        replace: Annotated[
            bool, typer.Option("--replace", help="Overwrite a timer scheduled since.")
        ] = False,
    ) -> None:
        """Schedule a dead letter again with attempts reset; exit 1 if there is none."""
        due = _parse_at(at) if at is not None else self._clock.now()
        with self._session() as (target, store):
            if store.dead_letter(item_id) is None:
                fail(f"no dead letter {item_id} in {target.namespace}_dead", EXIT_NOT_FOUND)
            if not replace and store.exists(item_id):
                fail(
                    f"{item_id} is scheduled again since it died: see `flowsched timers show "
                    f"{item_id}`; pass --replace to overwrite it",
                    EXIT_NOT_FOUND,
                )
            try:
                requeued = self._scheduler(store, target).requeue(item_id, due, replace=replace)
            except MalformedDocument as exc:
                fail(f"dead letter {item_id} cannot be requeued: {exc.reason}", EXIT_NOT_FOUND)
        if not requeued:  # requeued, removed or scheduled again by someone else meanwhile
            fail(f"no dead letter {item_id} in {target.namespace}_dead", EXIT_NOT_FOUND)
        typer.echo(f"requeued {item_id}: due {render.iso(due)}, attempts reset")

    def stats(
        self,
        as_json: JsonOption = False,
    ) -> None:
        """Pending by kind, overdue (and the oldest), in flight, dead letters, quarantined;
        pending by route (handler name or kind) with the live nodes serving each."""
        now = self._clock.now()
        with self._session() as (target, store):
            figures = collect_stats(store, now)
        if as_json:
            _echo_json(render.stats_json(figures))
            return
        typer.echo(f"{target.namespace} at {target.shown}, {render.iso(now)}")
        for line in render.stats_lines(figures):
            typer.echo(line)

    def nodes(self, as_json: JsonOption = False) -> None:
        """The live nodes (by their heartbeat): routes served, last heartbeat, and each
        one's clock offset (the database's clock minus the node's, as it measured it)."""
        now = self._clock.now()
        with self._session() as (target, store):
            heading = f"{target.namespace} at {target.shown}, {render.iso(now)}"
            lines = render.nodes_output(store.nodes, now, heading, as_json)
        typer.echo("\n".join(lines))

    def migrate(
        self,
        drop_legacy_index: Annotated[
            bool,
            typer.Option(
                "--drop-legacy-index",
                help="Also drop the (kind, ready_at) claim index of versions before routing "
                "(once no such node runs).",
            ),
        ] = False,
        buckets: Annotated[
            int | None,
            typer.Option(
                "--buckets",
                min=1,
                max=MAX_BUCKETS,
                help="The schedulers' buckets setting (MongoScheduler(buckets=...)), to give "
                "timers stored before buckets theirs [default: the count the collection's "
                "nodes recorded, else 1].",
            ),
        ] = None,
    ) -> None:
        """Give a route to timers stored before routing, so that nodes claim them again.

        Flow timers go to their flow's handler (flow:<Flow>), other timers keep being routed
        by kind. Idempotent: a second run changes nothing."""
        from flowsched.flow.timers import FLOW_TIMER_KINDS, flow_handler
        from flowsched.mongo.migration import add_routes, legacy_index
        from flowsched.mongo.store import TimerStore

        with self._session() as (target, opened):
            # Checks (or records) the bucket count too: one the nodes disagree with is refused.
            store = TimerStore(opened.items, buckets or opened.buckets, node=_cli_node())
            store.ensure_indexes()  # the route index, before nodes look for routes
            report = add_routes(
                store,
                [kind.value for kind in FLOW_TIMER_KINDS],
                flow_handler,
                drop_legacy_index=drop_legacy_index,
            )
            legacy = legacy_index(store)
        typer.echo(f"{target.namespace} at {target.shown}: routed {report.total} timer(s)")
        for route, count in sorted(report.routed.items()):
            typer.echo(f"  {route}  {count}")
        typer.echo(f"dead letters given their flow's handler: {report.dead_letters}")
        typer.echo(f"left without a route: {report.left}")
        typer.echo(f"given their bucket: {report.bucketed}")
        if report.dropped_legacy_index:
            typer.echo("dropped the legacy claim index 'claim' (kind, ready_at)")
        elif legacy:
            typer.echo(
                "the legacy claim index 'claim' (kind, ready_at) is still there: drop it with "
                "--drop-legacy-index once every node runs a version with routing"
            )

    # -- helpers ------------------------------------------------------------------------------

    @contextmanager
    def _session(self) -> Iterator[tuple[MongoTarget, TimerStore]]:
        """The target's store; driver errors inside become one line and exit 2."""
        target = self._connection.target()
        collection = target.collection
        with reporting(target), self._connect(target) as database:
            if not database.list_collection_names(filter={"name": collection}):
                fail(
                    f"no collection {target.namespace} at {target.shown} "
                    "(check --uri, --db and --collection)"
                )
            from flowsched.mongo.store import TimerStore, recorded_buckets

            items = database[collection]
            # Look-ups by id name the bucket: count them as the collection's nodes do.
            yield target, TimerStore(items, recorded_buckets(items) or 1, node=_cli_node())

    def _scheduler(self, store: TimerStore, target: MongoTarget) -> MongoScheduler:
        # Never started: it only carries out this one call, with the scheduler's own fencing.
        return MongoScheduler(
            store.items,
            node_id=_cli_node(),
            clock=self._clock,
            op_timeout=target.timeout,
            buckets=store.buckets,
        )


def _cli_node() -> str:
    return f"flowsched-cli@{socket.gethostname()}:{os.getpid()}"


def _echo_json(data: dict[str, Any]) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _no_timer(item_id: str, target: MongoTarget, store: TimerStore) -> NoReturn:
    hint = ""
    if store.dead_letter(item_id) is not None:
        hint = f" (it is a dead letter: flowsched timers requeue {item_id})"
    fail(f"no timer {item_id} in {target.namespace}{hint}", EXIT_NOT_FOUND)


def _warn(message: str) -> None:
    print(f"flowsched: warning: {message}", file=sys.stderr)


def _flow_waiting_on(document: Any) -> tuple[str, str] | None:
    """(flow, flow instance id) when ``document`` is a flow domain's own timer."""
    if document is None:
        return None
    from flowsched.flow.timers import FLOW_TIMER_KINDS, flow_handler

    handler, flow_id = document.get("handler"), document.get("flow_id")
    if not isinstance(handler, str) or not isinstance(flow_id, str):
        return None
    if document.get("kind") not in {kind.value for kind in FLOW_TIMER_KINDS}:
        return None
    prefix = flow_handler("")
    return (handler.removeprefix(prefix), flow_id) if handler.startswith(prefix) else None


def _cancel_note(document: Any, now: datetime) -> str:
    claim = claim_of(document) if document is not None else None
    if claim is None or not claim.live(now):
        return ""
    return f" (a delivery running on {claim.owner} may still finish; its outcome is not written)"


def _parse_at(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--at {text!r}: not an ISO 8601 time (e.g. 2026-03-01T12:00:00Z)")
    return when if when.tzinfo else when.replace(tzinfo=UTC)
