"""Internal: ``flowsched timers ... --uri postgresql://...`` - the verbs on a PostgreSQL table.

Given a ``postgresql://`` (or ``postgres://``) ``--uri``, the ``timers`` group runs these
verbs instead of the MongoDB ones: ``list``, ``show``, ``cancel``, ``pause``, ``resume``,
``dead-letters``, ``requeue``, ``quarantined`` and ``stats``, built on the store interface
(:class:`~flowsched.postgres.PostgresTimerStore`: ``timers()``, ``history()``, ``pause`` /
``resume``, ``remove``, ``dead_letters``, ``requeue``, ``quarantined``), never on rows, so an
operator's action is fenced exactly like a program's. ``--table`` names the timers table
(default ``flowsched_timers``), before or after the verb; :mod:`flowsched.cli.timers_target`
picks these verbs or the MongoDB ones.

Exit codes: 0 done, 1 no such timer / dead letter, 2 usage or connection problem.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from flowsched.cli._output import fail, kind_option
from flowsched.cli.mongo_target import redact
from flowsched.errors import SchedulerUnavailable

if TYPE_CHECKING:
    from flowsched.postgres import PostgresTimerStore
    from flowsched.steering import Attempt, TimerInfo, TimerState

__all__ = ["DEFAULT_TABLE", "PostgresTimers"]

DEFAULT_TABLE = "flowsched_timers"
EXIT_NOT_FOUND = 1
_STATES = ("scheduled", "claimed", "paused", "dead")

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TableOption = Annotated[
    str | None,
    typer.Option("--table", metavar="NAME", help=f"The timers table [default: {DEFAULT_TABLE}]."),
]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _info_json(info: TimerInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "kind": info.kind.value,
        "handler": info.handler,
        "flow_id": info.flow_id,
        "due": _iso(info.due),
        "state": info.state,
        "attempts": info.attempts,
        "last_error": info.last_error,
        "node": info.node,
        "lease_until": _iso(info.lease_until),
        "recurrence": None if info.recurrence is None else info.recurrence.to_json(),
        "payload_size": info.payload_size,
        "payload": info.payload,
    }


def _attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "node": attempt.node,
        "started": _iso(attempt.started),
        "ended": _iso(attempt.ended),
        "outcome": attempt.outcome,
        "error_type": attempt.error_type,
        "error_message": attempt.error_message,
        "traceback": attempt.traceback,
    }


def _echo_json(value: object) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True))


class PostgresTimers:
    """The verbs on ``uri`` and its table; :meth:`group` is their click group."""

    def __init__(self) -> None:
        self.uri = ""
        self.table: str | None = None

    @contextmanager
    def store(self, table: str | None) -> Iterator[PostgresTimerStore]:
        """The table's store, closed on exit; a server that cannot be reached (or a bad
        table name) is one line on stderr and exit 2."""
        try:
            from flowsched.postgres import PostgresTimerStore
        except ImportError:
            fail("flowsched timers on PostgreSQL needs psycopg: pip install 'flowsched[postgres]'")
        name = table or self.table or DEFAULT_TABLE
        try:
            owner = PostgresTimerStore(self.uri, table=name, op_timeout=5.0, migrate=False)
        except ValueError as exc:
            fail(f"--table {name!r}: {exc}")
        except SchedulerUnavailable as exc:
            fail(str(exc))
        try:
            # A verb never creates tables: a table name mistyped is said, not made. One that
            # exists is brought to this flowsched's schema, as a starting node would.
            with owner.pool.connection(timeout=5.0) as conn:
                found = conn.execute("SELECT to_regclass(%s)", (f'"{name}_schema"',)).fetchone()
            if found is None or found[0] is None:
                fail(
                    f"no flowsched timers table {self.where(name)} (flowsched db migrate makes one)"
                )
            yield PostgresTimerStore(owner.pool, table=name, op_timeout=5.0)
        except SchedulerUnavailable as exc:
            fail(str(exc))
        finally:
            owner.close()

    def where(self, table: str | None) -> str:
        return f"{table or self.table or DEFAULT_TABLE} at {redact(self.uri)}"

    def group(self) -> Any:
        """The verbs as a click group (typer's)."""
        app = typer.Typer(rich_markup_mode=None, no_args_is_help=True)
        for name, verb in (
            ("list", self.list),
            ("show", self.show),
            ("cancel", self.cancel),
            ("pause", self.pause),
            ("resume", self.resume),
            ("dead-letters", self.dead_letters),
            ("requeue", self.requeue),
            ("quarantined", self.quarantined),
            ("stats", self.stats),
        ):
            app.command(name)(verb)
        return typer.main.get_command(app)

    # -- the verbs -------------------------------------------------------------------

    def list(
        self,
        kind: Annotated[str | None, typer.Option("--kind", metavar="KIND")] = None,
        flow: Annotated[str | None, typer.Option("--flow", metavar="FLOW_ID")] = None,
        handler: Annotated[str | None, typer.Option("--handler", metavar="NAME")] = None,
        state: Annotated[
            str | None, typer.Option("--state", metavar="STATE", help=", ".join(_STATES))
        ] = None,
        prefix: Annotated[str | None, typer.Option("--prefix", metavar="ID_PREFIX")] = None,
        limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
        after: Annotated[str | None, typer.Option("--after", metavar="CURSOR")] = None,
        table: TableOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Timers soonest due first (as timers() pages them); --after the cursor printed
        under a full page gives the next one."""
        from flowsched.store.records import TimerSelection

        if state is not None and state not in _STATES:
            fail(f"--state {state!r}: not one of {', '.join(_STATES)}")
        try:
            query = TimerSelection(
                prefix,
                flow,
                kind_option(kind),
                handler,
                cast("TimerState | None", state),  # checked against _STATES above
                None,
                None,
                limit,
                after,
            )
        except ValueError as exc:
            fail(str(exc))
        with self.store(table) as store:
            try:
                page = store.timers(query)
            except ValueError as exc:
                fail(str(exc))
        if as_json:
            _echo_json({"items": [_info_json(i) for i in page.items], "next": page.next})
            return
        typer.echo(f"{'ID':<30} {'KIND':<18} {'HANDLER':<16} {'STATE':<9} ATT DUE")
        for info in page.items:
            typer.echo(
                f"{info.id:<30} {info.kind.value:<18} {info.handler or '-':<16} "
                f"{info.state:<9} {info.attempts:>3} {info.due.isoformat()}"
            )
        if page.next is not None:
            typer.echo(f"more: --after {page.next}")

    def show(self, item_id: IdArg, table: TableOption = None, as_json: JsonOption = False) -> None:
        """Every field of one timer and its delivery history (also once it is gone)."""
        from flowsched.store.records import TimerSelection

        with self.store(table) as store:
            page = store.timers(TimerSelection(id_prefix=item_id, limit=1000))
            found = [info for info in page.items if info.id == item_id]
            attempts = store.history(item_id)
        if not found and not attempts:
            fail(f"no timer {item_id} in {self.where(table)}", EXIT_NOT_FOUND)
        info = found[0] if found else None
        if as_json:
            _echo_json(
                {
                    "id": item_id,
                    "timer": None if info is None else _info_json(info),
                    "history": [_attempt_json(a) for a in attempts],
                }
            )
            return
        typer.echo(f"{item_id} in {self.where(table)}")
        if info is None:
            typer.echo("  (gone: its history only)")
        else:
            for key, value in _info_json(info).items():
                if key != "id":
                    typer.echo(f"  {key}: {json.dumps(value) if key == 'payload' else value}")
        typer.echo(f"history ({len(attempts)} attempts, oldest first):")
        for a in attempts:
            ended = "running" if a.ended is None else f"{a.outcome} at {a.ended.isoformat()}"
            error = f" {a.error_type}: {a.error_message}" if a.error_type else ""
            typer.echo(f"  {a.started.isoformat()} on {a.node}: {ended}{error}")

    def cancel(
        self,
        item_id: Annotated[str | None, typer.Argument(metavar="[ID]", show_default=False)] = None,
        flow: Annotated[
            str | None,
            typer.Option("--flow", metavar="FLOW_ID", help="Every timer of this flow instance."),
        ] = None,
        table: TableOption = None,
    ) -> None:
        """Cancel a timer, or every timer of --flow FLOW_ID; exit 1 if there is none."""
        if (item_id is None) == (flow is None):
            fail("give a timer ID or --flow FLOW_ID (one of them)")
        with self.store(table) as store:
            if flow is not None:
                removed = store.remove_flow(flow)
                if not removed:
                    fail(f"no timer of flow instance {flow} in {self.where(table)}", 1)
                typer.echo(f"cancelled {len(removed)} timer(s) of flow instance {flow}")
                return
            assert item_id is not None
            if not store.remove(item_id):
                fail(f"no timer {item_id} in {self.where(table)}", EXIT_NOT_FOUND)
        typer.echo(f"cancelled {item_id}")

    def pause(self, item_id: IdArg, table: TableOption = None) -> None:
        """Pause a timer: it fires on no node until resumed; exit 1 if there is none."""
        with self.store(table) as store:
            if not store.pause(item_id):
                fail(f"no timer {item_id} in {self.where(table)}", EXIT_NOT_FOUND)
        typer.echo(f"paused {item_id}")

    def resume(self, item_id: IdArg, table: TableOption = None) -> None:
        """Resume a paused timer (a recurring one at its next slot); exit 1 if none."""
        with self.store(table) as store:
            if not store.resume(item_id):
                fail(f"no timer {item_id} in {self.where(table)}", EXIT_NOT_FOUND)
        typer.echo(f"resumed {item_id}")

    def dead_letters(self, table: TableOption = None, as_json: JsonOption = False) -> None:
        """The dead letters, oldest first."""
        with self.store(table) as store:
            letters = store.dead_letters()
        if as_json:
            _echo_json(
                [
                    {
                        "id": d.item.id,
                        "kind": d.item.kind.value,
                        "handler": d.item.handler,
                        "due": _iso(d.item.due),
                        "attempts": d.attempts,
                        "error": d.error,
                        "dead_at": _iso(d.dead_at),
                    }
                    for d in letters
                ]
            )
            return
        for d in letters:
            typer.echo(f"{d.item.id}  {d.attempts} attempts  {d.dead_at.isoformat()}  {d.error}")
        typer.echo(f"{len(letters)} dead letter(s) in {self.where(table)}")

    def requeue(self, item_id: IdArg, table: TableOption = None) -> None:
        """Schedule a dead letter again, due now, under a fresh generation; exit 1 if none."""
        with self.store(table) as store:
            item = store.requeue(item_id, store.now())
        if item is None:
            fail(f"no dead letter {item_id} in {self.where(table)}", EXIT_NOT_FOUND)
        typer.echo(f"requeued {item_id}, due {item.due.isoformat()}")

    def quarantined(self, table: TableOption = None, as_json: JsonOption = False) -> None:
        """Rows set aside because they are not valid timers, with the reason."""
        with self.store(table) as store:
            records = store.quarantined()
        if as_json:
            _echo_json(
                [
                    {"id": r.id, "reason": r.reason, "quarantined_at": _iso(r.quarantined_at)}
                    for r in records
                ]
            )
            return
        for r in records:
            typer.echo(f"{r.id}  {r.quarantined_at.isoformat()}  {r.reason}")
        typer.echo(f"{len(records)} quarantined row(s) in {self.where(table)}")

    def stats(self, table: TableOption = None, as_json: JsonOption = False) -> None:
        """Timers by state and by kind (dead letters included)."""
        from flowsched.store.records import TimerSelection

        states: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        with self.store(table) as store:
            after: str | None = None
            while True:
                page = store.timers(TimerSelection(limit=1000, after=after))
                for info in page.items:
                    states[info.state] += 1
                    kinds[info.kind.value] += 1
                if page.next is None:
                    break
                after = page.next
        total = sum(states.values())
        if as_json:
            _echo_json({"total": total, "states": dict(states), "kinds": dict(kinds)})
            return
        typer.echo(f"{total} timer(s) in {self.where(table)}")
        for state in _STATES:
            typer.echo(f"  {state:<10} {states[state]}")
        for kind, count in sorted(kinds.items()):
            typer.echo(f"  {kind:<18} {count}")
