"""Internal: ``flowsched explain`` and ``flowsched check``."""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from flowsched.cli._output import EXIT_INVALID, console, load, report_problems
from flowsched.cli.flows_option import FlowsOption, load_flows
from flowsched.config import Explanation, SchedulingConfig
from flowsched.errors import ConfigProblem

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
    _warn_unmentioned(config, flow, state, action)
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


def check(conf: ConfArg, flows: FlowsOption = None) -> None:
    """Validate CONF: list every error and near-miss key; exit 1 if there is any.

    With --flows MODULE:ATTR, also check the keys against those flow definitions (ATTR a
    Flow, a list of them, or a callable returning them), as FlowDomain's build() does."""
    config = load(conf, strict=False)
    definitions = load_flows(flows) if flows else None
    problems = list(config.warnings)
    if definitions is None:
        problems += [p.problem for p in config.root_problems() if p.named_like_a_flow]
    else:
        from flowsched.flow.check import config_problems

        problems += config_problems(definitions, config)
    recognised = len(config.action_keys()) + len(config.processing_time_keys())
    shaped = config.flow_shaped_keys()
    if not problems and shaped and not recognised:
        problems.append(
            ConfigProblem(
                None,
                None,
                f"{shaped} key(s) look like flow keys but none is one: action keys are "
                "<Flow>.<State>.<Action>.<type>, processing-time keys "
                "ipf.flow.<flow>.processing-time.<source>.<destination>.<type>",
            )
        )
    if problems:
        report_problems(str(conf), tuple(problems))
        raise typer.Exit(EXIT_INVALID)
    triples = {key.triple for key in config.action_keys()}
    limits = {(k.flow, k.source, k.destination) for k in config.processing_time_keys()}
    against = f", checked against flows {', '.join(sorted(definitions))}" if definitions else ""
    typer.echo(
        f"{conf}: OK: {len(config.action_keys())} action keys for {len(triples)} "
        f"flow/state/action patterns, {len(limits)} processing-time limits{against}"
    )


def _warn_unmentioned(config: SchedulingConfig, flow: str, state: str, action: str) -> None:
    """A name no key mentions gets wildcards and defaults only: likely a typo, so say so."""
    names = {
        "flow": {k.flow for k in config.action_keys()}
        | {k.flow for k in config.processing_time_keys()},
        "state": {k.state for k in config.action_keys()}
        | {s for k in config.processing_time_keys() for s in (k.source, k.destination)},
        "action": {k.action for k in config.action_keys()},
    }
    asked = {"flow": flow, "state": state, "action": action}
    for part, mentioned in config.mentions(flow, state, action).items():
        if mentioned:
            continue
        known = {n.lower(): n for n in names[part] if n != "Any"}
        close = difflib.get_close_matches(asked[part].lower(), list(known), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(known[c]) for c in close)}?)" if close else ""
        print(
            f"flowsched: warning: no key in {config.source or 'the file'} mentions {part} "
            f"{asked[part]!r}{hint}; only Any keys and defaults apply to it",
            file=sys.stderr,
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
