"""The build-time check: configuration keys must name flows, states and actions that exist.

A typo in ``application.conf`` (``CheckingFruad``) would otherwise be a key that silently
never applies. Each problem names the key, the part that matches nothing and the closest
names that do exist.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from flowsched.flow.definition import FlowDefinition
from flowsched.flow.rules import ConfiguredActionKey, ConfiguredProcessingKey

__all__ = ["ANY", "ConfiguredAction", "ConfiguredProcessingTime", "unknown_names"]

ANY = "Any"


@dataclass(frozen=True, slots=True)
class ConfiguredAction:
    """An action key as configured: ``key`` is the full key, e.g. ``Any.S.A.max-retries``.
    (``SchedulingConfig.action_keys()`` gives its own records of the same shape.)"""

    key: str
    flow: str
    state: str
    action: str


@dataclass(frozen=True, slots=True)
class ConfiguredProcessingTime:
    """A processing-time key as configured (``ipf.flow.F.processing-time.S.D.<type>``)."""

    key: str
    flow: str
    source: str
    destination: str


def unknown_names(
    flows: Mapping[str, FlowDefinition],
    actions: Iterable[ConfiguredActionKey],
    processing_times: Iterable[ConfiguredProcessingKey],
) -> list[str]:
    """One message per configured key naming something no registered flow has."""
    problems = [p for a in actions if (p := _action_problem(flows, a))]
    problems += [p for t in processing_times if (p := _processing_problem(flows, t))]
    return problems


def _action_problem(flows: Mapping[str, FlowDefinition], key: ConfiguredActionKey) -> str | None:
    if key.flow != ANY and key.flow not in flows:
        return _missing(key.key, "flow", key.flow, flows)
    scope = list(flows.values()) if key.flow == ANY else [flows[key.flow]]
    if key.state != ANY:
        states = {s for d in scope for s in d.states}
        if key.state not in states:
            return _missing(key.key, "state", key.state, states, _where(key.flow))
        scope_actions = {
            a for d in scope if key.state in d.states for a in d.states[key.state].actions
        }
    else:
        scope_actions = {a for d in scope for a in d.actions}
    if key.action != ANY and key.action not in scope_actions:
        where = _where(key.flow) + (f" in state {key.state!r}" if key.state != ANY else "")
        return _missing(key.key, "action", key.action, scope_actions, where)
    return None


def _processing_problem(
    flows: Mapping[str, FlowDefinition], key: ConfiguredProcessingKey
) -> str | None:
    definition = flows.get(key.flow)
    if definition is None:
        return _missing(key.key, "flow", key.flow, flows)
    for part, state in (("source state", key.source), ("destination state", key.destination)):
        if state not in definition.states:
            return _missing(key.key, part, state, definition.states, _where(key.flow))
    if key.source == key.destination:
        return f"{key.key}: source and destination are the same state {key.source!r}"
    if definition.states[key.source].terminal:
        return f"{key.key}: source {key.source!r} is a terminal state (it is never left)"
    return None


def _where(flow: str) -> str:
    return " in any registered flow" if flow == ANY else f" in flow {flow!r}"


def _missing(key: str, part: str, name: str, known: Iterable[str], where: str = "") -> str:
    candidates = sorted(set(known))
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listing = f"known: {', '.join(candidates) or 'none'}"
    return f"{key}: no {part} {name!r}{where} ({hint + ' ' if hint else ''}{listing})"
