"""Internal: which configuration keys are flowsched's, and what each one configures.

Two shapes are ours:

* action keys ``<Flow>.<State>.<Action>.<type>``, at the root or under ``ipf.flow.``;
* processing-time keys ``ipf.flow.<flow>.processing-time.<source>.<destination>.<type>``.

Everything else (``akka { ... }``, logging, ...) is somebody else's and is ignored, except a key
that is *almost* ours — a near-miss type (``timeout-duraton``), a misspelt ``processing-time``,
a lower-case ``any`` — which is reported rather than silently doing nothing.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import StrEnum

from flowsched.config.hocon import format_key
from flowsched.errors import ConfigProblem

__all__ = [
    "ALL_TYPES",
    "ANY",
    "ActionPath",
    "ActionType",
    "KeyForm",
    "ProcessingPath",
    "ProcessingType",
    "classify",
]

ANY = "Any"
"""The wildcard: matches every flow, state or action in its position."""

PROCESSING_TIME = "processing-time"
_IPF_FLOW = ("ipf", "flow")
_CLOSE = 0.8  # difflib ratio: "max-retry" ~ "max-retries" is 0.8; "retries" (0.78) is not


class ActionType(StrEnum):
    """The types an action key can set (the last part of the key)."""

    TIMEOUT_DURATION = "timeout-duration"
    INITIAL_RETRY_INTERVAL = "initial-retry-interval"
    MAX_RETRIES = "max-retries"
    BACKOFF_TYPE = "backoff-type"
    CUSTOM_BACKOFFS = "custom-backoffs"
    JITTER_ENABLED = "jitter-enabled"
    JITTER_FACTOR = "jitter-factor"


class ProcessingType(StrEnum):
    """The types a processing-time key can set."""

    TIMEOUT_DURATION = "timeout-duration"
    OFFSET_ID = "offset-id"


class KeyForm(StrEnum):
    """Where an action key was written. ``IPF_FLOW`` wins over ``ROOT`` for the same key."""

    IPF_FLOW = "ipf.flow"
    ROOT = "root"


@dataclass(frozen=True, slots=True)
class ActionPath:
    """A recognised action key."""

    flow: str
    state: str
    action: str
    type: ActionType
    form: KeyForm
    key: str


@dataclass(frozen=True, slots=True)
class ProcessingPath:
    """A recognised processing-time key."""

    flow: str
    source: str
    destination: str
    type: ProcessingType
    key: str


_ACTION_TYPES = frozenset(ActionType)
_PROCESSING_TYPES = frozenset(ProcessingType)
ALL_TYPES: frozenset[str] = _ACTION_TYPES | _PROCESSING_TYPES
"""Every type name; objects under these names are values, not sub-trees."""


def classify(
    path: tuple[str, ...], value_text: str
) -> ActionPath | ProcessingPath | ConfigProblem | None:
    """What ``path`` configures; a :class:`ConfigProblem` for a near-miss; ``None`` if not ours."""
    if path[:2] == _IPF_FLOW:
        rest = path[2:]
        if len(rest) >= 2 and rest[1] == PROCESSING_TIME:
            return _processing(path, rest, value_text)
        if len(rest) == 5 and _close(rest[1], (PROCESSING_TIME,)):
            return _near_miss(path, value_text, 3, PROCESSING_TIME)
        if len(rest) == 4:
            return _action(path, rest, KeyForm.IPF_FLOW, value_text)
        return None
    if len(path) == 5 and path[1] == PROCESSING_TIME and path[4] in _PROCESSING_TYPES:
        meant = format_key((*_IPF_FLOW, *path))
        return ConfigProblem(
            format_key(path),
            value_text,
            f"processing-time keys live under ipf.flow; did you mean {meant}?",
            suggestion=meant,
        )
    if len(path) == 4:
        return _action(path, path, KeyForm.ROOT, value_text)
    return None


def _action(
    path: tuple[str, ...], parts: tuple[str, ...], form: KeyForm, value_text: str
) -> ActionPath | ConfigProblem | None:
    flow, state, action, type_name = parts
    if type_name not in _ACTION_TYPES:
        match = _close(type_name, _ACTION_TYPES)
        return _near_miss(path, value_text, len(path) - 1, match) if match else None
    if state == PROCESSING_TIME:
        return ConfigProblem(
            format_key(path),
            value_text,
            "processing-time is not a state: processing-time keys are "
            "ipf.flow.<flow>.processing-time.<source>.<destination>.<type>",
        )
    for offset, part in enumerate((flow, state, action)):
        if part != ANY and part.lower() == ANY.lower():
            index = len(path) - 4 + offset
            return _near_miss(path, value_text, index, ANY, "the wildcard is spelt Any")
    return ActionPath(flow, state, action, ActionType(type_name), form, format_key(path))


def _processing(
    path: tuple[str, ...], rest: tuple[str, ...], value_text: str
) -> ProcessingPath | ConfigProblem:
    if len(rest) != 5:
        return ConfigProblem(
            format_key(path),
            value_text,
            "processing-time keys are ipf.flow.<flow>.processing-time.<source>.<destination>."
            "<type> with type timeout-duration or offset-id",
        )
    flow, _, source, destination, type_name = rest
    if type_name not in _PROCESSING_TYPES:
        match = _close(type_name, _PROCESSING_TYPES)
        if match:
            return _near_miss(path, value_text, len(path) - 1, match)
        valid = ", ".join(sorted(_PROCESSING_TYPES))
        return ConfigProblem(
            format_key(path), value_text, f"unknown processing-time type; valid types: {valid}"
        )
    return ProcessingPath(flow, source, destination, ProcessingType(type_name), format_key(path))


def _close(word: str, candidates: frozenset[str] | tuple[str, ...]) -> str | None:
    normal = word.lower().replace("_", "-")
    matches = difflib.get_close_matches(normal, sorted(candidates), n=1, cutoff=_CLOSE)
    return matches[0] if matches else None


def _near_miss(
    path: tuple[str, ...], value_text: str, index: int, meant: str, why: str = ""
) -> ConfigProblem:
    fixed = (*path[:index], meant, *path[index + 1 :])
    reason = f"{why}; " if why else f"unknown name {path[index]!r}; "
    return ConfigProblem(
        format_key(path),
        value_text,
        f"{reason}did you mean {format_key(fixed)}?",
        suggestion=format_key(fixed),
    )
