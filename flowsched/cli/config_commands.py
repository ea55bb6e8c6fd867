"""Internal: ``flowsched explain`` and ``flowsched check``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from flowsched.cli._output import EXIT_INVALID, console, load, report_problems
from flowsched.config import Explanation

__all__ = ["register"]

ConfArg = Annotated[Path, typer.Argument(metavar="CONF", help="A HOCON file (application.conf).")]


def register(app: typer.Typer) -> None:
    """Add ``explain`` and ``check`` to ``app``."""
    app.command()(explain)
    app.command()(check)


def explain(
    conf: ConfArg,
    flow: Annotated[str, typer.Argument(metavar="FLOW")],
    state: Annotated[str, typer.Argument(metavar="STATE")],
    action: Annotated[str, typer.Argument(metavar="ACTION")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show each type's value for FLOW.STATE.ACTION, the key it came from, and shadowed keys."""
    config = load(conf)
    explanation = config.explain(flow, state, action)
    if as_json:
        typer.echo(json.dumps(_as_dict(explanation), indent=2))
        return
    table = Table(title=f"{flow}.{state}.{action}", title_justify="left")
    for column in ("type", "value", "winning key", "shadowed keys"):
        table.add_column(column)
    for row in explanation.types:
        shadowed = "\n".join(row.shadowed) or "-"
        table.add_row(row.type.value, Text(row.text), Text(row.source), Text(shadowed))
    out = console()
    out.print(table)
    out.print(Text(f"policy: {config.action(flow, state, action).describe()}"))
    out.print(Text(f"retry schedule: flowsched backoff --from {conf} {flow} {state} {action}"))


def check(conf: ConfArg) -> None:
    """Validate CONF: list every error and near-miss key; exit 1 if there is any."""
    config = load(conf, strict=False)
    if config.warnings:
        report_problems(str(conf), config.warnings)
        raise typer.Exit(EXIT_INVALID)
    triples = {key.triple for key in config.action_keys()}
    limits = {(k.flow, k.source, k.destination) for k in config.processing_time_keys()}
    typer.echo(
        f"{conf}: OK: {len(config.action_keys())} action keys for {len(triples)} "
        f"flow/state/action patterns, {len(limits)} processing-time limits"
    )


def _as_dict(explanation: Explanation) -> dict[str, object]:
    return {
        "flow": explanation.flow,
        "state": explanation.state,
        "action": explanation.action,
        "types": {
            row.type.value: {"value": row.text, "key": row.source, "shadowed": list(row.shadowed)}
            for row in explanation.types
        },
    }
