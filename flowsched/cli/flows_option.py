"""Internal: ``--flows MODULE:ATTR``, the flows a command checks a configuration against."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from typing import Annotated

import typer

from flowsched.cli._output import fail
from flowsched.flow.definition import Flow, FlowDefinition

__all__ = ["FlowsOption", "load_flows"]

FlowsOption = Annotated[
    str | None,
    typer.Option(
        "--flows",
        metavar="MODULE:ATTR",
        help="Check against these flows: ATTR is a Flow, a durable state machine (anything "
        "with as_flow(), such as a flowsched.integrations DurableMachine), a list of them, or "
        "a callable returning them (e.g. myapp.flows:all_flows). The current directory is "
        "importable.",
    ),
]


def load_flows(spec: str) -> dict[str, FlowDefinition]:
    """Import ``MODULE:ATTR`` and return its flows by name; exit 2 with a clear message if
    it cannot be imported or is not flows."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        fail(f"--flows {spec!r}: expected MODULE:ATTR (e.g. myapp.flows:credit_transfer)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: object = importlib.import_module(module_name)
    except Exception as exc:  # an import runs the user's code: anything may go wrong
        fail(f"--flows {spec!r}: cannot import {module_name}: {type(exc).__name__}: {exc}")
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            fail(f"--flows {spec!r}: {module_name} has no attribute {attr!r}")
    if (
        callable(found)
        and not isinstance(found, Flow | FlowDefinition | type)
        and not _machine(found)
    ):
        try:
            found = found()
        except Exception as exc:
            fail(f"--flows {spec!r}: calling {attr} raised {type(exc).__name__}: {exc}")
    one = isinstance(found, Flow | FlowDefinition) or _machine(found)
    items: Iterable[object] = [found] if one else []
    if not items:
        if isinstance(found, Iterable) and not isinstance(found, str | bytes):
            items = list(found)
        if not items or not all(isinstance(i, Flow | FlowDefinition) or _machine(i) for i in items):
            fail(
                f"--flows {spec!r}: expected a Flow, a list of Flows or a callable returning "
                f"them (or a durable state machine); got {type(found).__name__}"
            )
    definitions: dict[str, FlowDefinition] = {}
    for item in [_as_flow(spec, item) for item in items]:
        try:
            definition = item.build() if isinstance(item, Flow) else item
        except ValueError as exc:
            fail(f"--flows {spec!r}: flow definition error: {exc}")
        assert isinstance(definition, FlowDefinition)
        definitions[definition.name] = definition
    return definitions


def _machine(value: object) -> bool:
    """A durable state machine (``flowsched.integrations``): it can state itself as a flow."""
    return not isinstance(value, type) and callable(getattr(value, "as_flow", None))


def _as_flow(spec: str, item: object) -> object:
    """``item``, or the ``Flow`` a durable machine states itself as (its name, its states)."""
    if not _machine(item):
        return item
    try:
        return getattr(item, "as_flow")()  # noqa: B009
    except (TypeError, ValueError) as exc:
        fail(f"--flows {spec!r}: cannot check against machine {item!r}: {exc}")
