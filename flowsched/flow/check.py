"""Internal: the build-time check that configuration keys name existing flows, states, actions.

A typo in ``application.conf`` (``CheckingFruad``) would otherwise be a key that silently
never applies. Each problem names the key, the part that matches nothing, the closest names
that do exist, and the key the author probably meant.

Root-form keys (``<Flow>.<State>.<Action>.<type>``, no ``ipf.flow.`` prefix) share the root
of ``application.conf`` with other libraries: ``alpakka.s3.retry-settings.max-retries`` has
the shape of an action key of a flow ``alpakka``. So a root key is only checked when its flow
part is ``Any``, a registered flow, or close to one (``OBCreditTranfer``); any other is
somebody else's and is logged at debug level. Keys under ``ipf.flow.`` are always checked.
Root keys that do not fit the key forms at all (``SchedulingConfig.root_problems``) are
raised here by the same rule: when their first part is a registered flow or close to one.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping

from flowsched.config import ANY, ActionKey, KeyForm, ProcessingTimeKey, SchedulingConfig
from flowsched.errors import ConfigProblem
from flowsched.flow.definition import FlowDefinition

__all__ = ["config_problems", "unknown_names"]

log = logging.getLogger("flowsched.flow")

_NEAR_FLOW = 0.8  # difflib ratio, case ignored: "OBCreditTranfer" ~ "OBCreditTransfer" is 0.97


def config_problems(
    flows: Mapping[str, FlowDefinition], config: SchedulingConfig
) -> list[ConfigProblem]:
    """Everything ``build()`` refuses in ``config`` for these flows: root keys of a
    registered flow that do not fit the key forms, and keys naming something no flow has
    (each with its file and line when ``config`` was read from a file)."""
    problems = [
        found.problem for found in config.root_problems() if _is_flow_like(flows, found.flow)
    ]
    problems += unknown_names(flows, config.action_keys(), config.processing_time_keys())
    return list(config.locate(tuple(problems)))


def _is_flow_like(flows: Mapping[str, FlowDefinition], name: str) -> bool:
    if name == ANY or name in flows:
        return True
    names = [flow.lower() for flow in flows]
    return bool(difflib.get_close_matches(name.lower(), names, n=1, cutoff=_NEAR_FLOW))


def unknown_names(
    flows: Mapping[str, FlowDefinition],
    actions: Iterable[ActionKey],
    processing_times: Iterable[ProcessingTimeKey],
) -> list[ConfigProblem]:
    """One problem per configured key naming something no registered flow has (root-form
    keys only when they look like ours: see the module docstring)."""
    problems = [p for a in actions if _ours(flows, a) and (p := _action_problem(flows, a))]
    problems += [p for t in processing_times if (p := _processing_problem(flows, t))]
    return problems


def _ours(flows: Mapping[str, FlowDefinition], key: ActionKey) -> bool:
    """Whether ``key`` is meant for the flow domain rather than another library."""
    if key.form is not KeyForm.ROOT or _is_flow_like(flows, key.flow):
        return True
    log.debug(
        "configuration key %s: %r is no registered flow; not ours, ignored", key.key, key.flow
    )
    return False


def _action_problem(flows: Mapping[str, FlowDefinition], key: ActionKey) -> ConfigProblem | None:
    if key.flow != ANY and key.flow not in flows:
        return _missing(key.key, "flow", key.flow, flows)
    scope = list(flows.values()) if key.flow == ANY else [flows[key.flow]]
    if key.state != ANY:
        states = {s for d in scope for s in d.states}
        if key.state not in states:
            return _missing(key.key, "state", key.state, states, _where(key.flow))
        actions = {a for d in scope if key.state in d.states for a in d.states[key.state].actions}
    else:
        actions = {a for d in scope for a in d.actions}
    if key.action != ANY and key.action not in actions:
        where = _where(key.flow) + (f" in state {key.state!r}" if key.state != ANY else "")
        return _missing(key.key, "action", key.action, actions, where)
    return None


def _processing_problem(
    flows: Mapping[str, FlowDefinition], key: ProcessingTimeKey
) -> ConfigProblem | None:
    definition = flows.get(key.flow)
    if definition is None:
        return _missing(key.key, "flow", key.flow, flows)
    for part, state in (("source state", key.source), ("destination state", key.destination)):
        if state not in definition.states:
            return _missing(key.key, part, state, definition.states, _where(key.flow))
    if key.source == key.destination:
        return ConfigProblem(key.key, None, f"source and destination are both {key.source!r}")
    if definition.states[key.source].terminal:
        return ConfigProblem(
            key.key, None, f"source {key.source!r} is a terminal state (it is never left)"
        )
    return None


def _where(flow: str) -> str:
    return " in any registered flow" if flow == ANY else f" in flow {flow!r}"


def _missing(
    key: str, part: str, name: str, known: Iterable[str], where: str = ""
) -> ConfigProblem:
    candidates = sorted(set(known))
    # Case ignored: "checkingfraud" is closest to "CheckingFraud", whatever difflib thinks.
    lowered = {c.lower(): c for c in candidates}
    close = [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), 3, 0.6)]
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    message = f"no {part} {name!r}{where} ({hint}known: {', '.join(candidates) or 'none'})"
    return ConfigProblem(key, None, message, _suggest(key, name, close[0]) if close else None)


def _suggest(key: str, wrong: str, right: str) -> str:
    """``key`` with its (first) part ``wrong`` replaced by ``right``."""
    parts = key.split(".")
    return ".".join([*parts[: parts.index(wrong)], right, *parts[parts.index(wrong) + 1 :]])
