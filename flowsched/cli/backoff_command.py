"""Internal: ``flowsched backoff`` — preview a retry schedule, from options or a config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from flowsched.backoff import (
    RetryPolicy,
    parse_backoff_type,
    parse_backoffs,
    parse_jitter_factor,
    parse_max_retries,
)
from flowsched.cli._output import console, fail, human, load
from flowsched.durations import parse_duration
from flowsched.errors import ConfigError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``backoff`` to ``app``."""
    app.command()(backoff)


def backoff(
    backoff_type: Annotated[
        str | None,
        typer.Option("--type", help="EXPONENTIAL (default), LINEAR or USER_DEFINED."),
    ] = None,
    initial: Annotated[
        str | None,
        typer.Option(help="initial-retry-interval: a duration; a bare number is ms [1s]."),
    ] = None,
    max_retries: Annotated[str | None, typer.Option(help="Number of retries [0].")] = None,
    custom: Annotated[
        str | None, typer.Option(help="custom-backoffs for USER_DEFINED, e.g. 10s,30m.")
    ] = None,
    jitter: Annotated[
        bool | None, typer.Option("--jitter/--no-jitter", help="Jitter on or off [on].")
    ] = None,
    jitter_factor: Annotated[
        str | None, typer.Option(help="Jitter factor in [0, 1] [0.2].")
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(help="Action timeout: retries at or after it are not scheduled."),
    ] = None,
    from_: Annotated[
        tuple[str, str, str, str] | None,
        typer.Option(
            "--from",
            metavar="CONF FLOW STATE ACTION",
            help="Start from the policy (and timeout) this file gives the action.",
        ),
    ] = None,
) -> None:
    """Print each retry's wait and when it is due after the first invocation.

    With jitter enabled the ranges a wait and a due time can fall in are shown too.
    Options given with --from override what the file says.
    """
    policy, limit = RetryPolicy(), None
    if from_ is not None:
        conf, flow, state, action = from_
        resolved = load(Path(conf)).action(flow, state, action)
        policy, limit = resolved.retry, resolved.timeout
    changes = _overrides(backoff_type, initial, max_retries, custom, jitter, jitter_factor)
    try:
        policy = RetryPolicy(**{**policy.model_dump(), **changes})
    except ValidationError as exc:
        fail("; ".join(str(error["msg"]).removeprefix("Value error, ") for error in exc.errors()))
    if timeout is not None:
        limit = _option("--timeout", timeout, parse_duration)
    _print_schedule(policy, limit)


def _overrides(
    backoff_type: str | None,
    initial: str | None,
    max_retries: str | None,
    custom: str | None,
    jitter: bool | None,
    jitter_factor: str | None,
) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if backoff_type is not None:
        changes["backoff_type"] = _option("--type", backoff_type, parse_backoff_type)
    if initial is not None:
        changes["initial_interval"] = _option("--initial", initial, parse_duration)
    if max_retries is not None:
        changes["max_retries"] = _option("--max-retries", max_retries, parse_max_retries)
    if custom is not None:
        items = [item.strip() for item in custom.split(",")] if custom.strip() else []
        changes["custom_backoffs"] = _option("--custom", items, parse_backoffs)
    if jitter is not None:
        changes["jitter_enabled"] = jitter
    if jitter_factor is not None:
        changes["jitter_factor"] = _option("--jitter-factor", jitter_factor, parse_jitter_factor)
    return changes


def _option(name: str, value: Any, parse: Any) -> Any:
    try:
        return parse(value)
    except ConfigError as exc:
        fail(f"{name} {exc.problems[0].value}: {exc.problems[0].message}")
    except ValueError as exc:
        shown = ",".join(value) if isinstance(value, list) else value
        fail(f"{name} {shown!r}: {exc}")


def _print_schedule(policy: RetryPolicy, limit: timedelta | None) -> None:
    out = console()
    timeout_text = human(limit) if limit is not None else "none"
    out.print(f"{policy.describe()}; timeout {timeout_text}", markup=False)
    if policy.max_retries == 0:
        out.print("no retries (max-retries = 0)")
        return
    jittered = policy.jitter_enabled and policy.jitter_factor > 0
    table = Table()
    columns = ["retry", "wait", "due after"]
    if jittered:
        columns += ["wait with jitter", "due after, with jitter"]
    for column in [*columns, "scheduled"]:
        table.add_column(column, justify="right" if column == "retry" else "left")
    due, low_due, high_due = timedelta(0), timedelta(0), timedelta(0)
    never = None
    horizon = datetime.max.replace(tzinfo=UTC) - datetime.now(UTC)  # to the year 9999's end
    for n, wait in enumerate(policy.delays(), start=1):
        low, high = policy.jitter_range(n)
        try:
            due, low_due, high_due = due + wait, low_due + low, high_due + high
        except OverflowError:  # past any timedelta, so past the year 9999 too
            never = n
            break
        if (low_due if jittered else due) > horizon:  # a retry the domain never schedules
            never = n
            break
        row = [str(n), human(wait), human(due)]
        if jittered:
            row += [_span(low, high), _span(low_due, high_due)]
        row.append(_scheduled(due if not jittered else low_due, high_due, limit))
        table.add_row(*row)
    out.print(table)
    if never is not None:
        out.print(
            f"retries {never} to {policy.max_retries} are never scheduled: "
            "from now, the waits add up past the year 9999"
        )


def _span(low: timedelta, high: timedelta) -> str:
    return f"{human(low)} .. {human(high)}"


def _scheduled(earliest: timedelta, latest: timedelta, limit: timedelta | None) -> str:
    if limit is None or latest < limit:
        return "yes"
    if earliest >= limit:
        return f"no: at or after the {human(limit)} timeout"
    return f"depends on jitter: only if before the {human(limit)} timeout"
