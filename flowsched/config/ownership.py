"""Internal: which keys of a file are ours, and the closest valid form of those that do not
fit.

The rule (``docs/reference/configuration.md``, "What is ours"):

* ``ipf.flow.…`` is always ours, and strict: every key under it must be an action key
  ``<Flow>.<State>.<Action>.<type>`` or a processing-time key
  ``<flow>.processing-time.<source>.<destination>.<type>``. A child of ``ipf`` that is a near
  miss of ``flow`` (``ipf.flows``, ``ipf.Flow``) is an error; other children of ``ipf`` are
  IPF's own settings and are ignored.
* A root block whose first part is ``Any`` (or ``any``, reported) is ours and strict.
* ``ipf-scheduler`` is read by :mod:`flowsched.config.scheduler_settings`; the blocks of
  known libraries (:data:`FOREIGN`) are ignored.
* Any other root key with four parts whose last is a type is read as an action key.
* Any other root key is *flow-shaped* when its last part is, or resembles, a type name (or
  it holds ``processing-time``). A flow-shaped key that does not fit is not an error on its
  own — its first part may be another library's — but a :class:`RootProblem`: ``build()``
  and ``flowsched check --flows`` raise it when that first part is a registered flow or
  close to one (case ignored); ``flowsched check`` without flows reports it when that first
  part starts with an upper-case letter, as flow names do and library blocks do not.
* A four-part key whose last part is a near miss of a type (``timeout-duraton``) is an error
  wherever it is, except in a :data:`FOREIGN` block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flowsched.config.hocon import format_key
from flowsched.config.keys import (
    ACTION_TYPES,
    ALL_TYPES,
    ANY,
    PROCESSING_TIME,
    PROCESSING_TYPES,
    ActionPath,
    ActionType,
    KeyForm,
    ProcessingPath,
    ProcessingType,
)
from flowsched.config.suggest import closest, is_near
from flowsched.errors import ConfigProblem

__all__ = ["FOREIGN", "Finding", "RootProblem", "check_flow_key", "classify"]

FOREIGN = frozenset(
    {
        "akka",
        "pekko",
        "alpakka",
        "logging",
        "logback",
        "kamon",
        "cinnamon",
        "play",
        "slick",
        "ssl-config",
        "ipf-scheduler",
    }
)
"""Root blocks of other libraries (and ``ipf-scheduler``, read on its own): never ours."""

_IPF = "ipf"
_IPF_FLOW = ("ipf", "flow")
_ACTION_FORM = "<Flow>.<State>.<Action>.<type>"
_PROCESSING_FORM = "ipf.flow.<flow>.processing-time.<source>.<destination>.<type>"
_TYPE_ALIASES = {
    "timeout": ActionType.TIMEOUT_DURATION,
    "duration": ActionType.TIMEOUT_DURATION,
    "action-timeout": ActionType.TIMEOUT_DURATION,
    "retries": ActionType.MAX_RETRIES,
    "retry": ActionType.MAX_RETRIES,
    "attempts": ActionType.MAX_RETRIES,
    "max-attempts": ActionType.MAX_RETRIES,
    "backoff": ActionType.BACKOFF_TYPE,
    "backoff-strategy": ActionType.BACKOFF_TYPE,
    "backoffs": ActionType.CUSTOM_BACKOFFS,
    "jitter": ActionType.JITTER_ENABLED,
    "interval": ActionType.INITIAL_RETRY_INTERVAL,
    "retry-interval": ActionType.INITIAL_RETRY_INTERVAL,
    "initial-interval": ActionType.INITIAL_RETRY_INTERVAL,
}
_PROCESSING_ALIASES = {
    "timeout": ProcessingType.TIMEOUT_DURATION,
    "duration": ProcessingType.TIMEOUT_DURATION,
    "offset": ProcessingType.OFFSET_ID,
}
_PASCAL = re.compile(r"[A-Z][A-Za-z0-9]*")
_STATE_NAME = re.compile(r"[A-Z]?[a-z]+(?:ing|ed)(?:[A-Z0-9_]|$)")


@dataclass(frozen=True, slots=True)
class RootProblem:
    """A root key that does not fit but may belong to another library: ``flow`` is its first
    part. ``flowsched check`` reports it; ``build()`` raises it when ``flow`` is a registered
    flow (or close to one)."""

    flow: str
    problem: ConfigProblem

    @property
    def named_like_a_flow(self) -> bool:
        """Whether ``flow`` starts with an upper-case letter, as flow names do (library
        blocks do not): such problems are reported even before the flows are known."""
        return self.flow[:1].isupper()


Finding = ActionPath | ProcessingPath | ConfigProblem | RootProblem | None
"""What a key is: ours and valid, ours and wrong, possibly ours and wrong, or not ours."""


def classify(path: tuple[str, ...], value_text: str) -> Finding:
    """What the key ``path`` (set to ``value_text``) is; see the module docstring."""
    head = path[0]
    if head == _IPF:
        return _under_ipf(path, value_text)
    if head in FOREIGN:
        return None
    if head.lower() == ANY.lower():
        return check_flow_key((), path, value_text)
    if len(path) == 4 and (path[3] in ACTION_TYPES or is_near(path[3], ACTION_TYPES)):
        return check_flow_key((), path, value_text)
    if len(path) == 5 and path[1] == PROCESSING_TIME and path[4] in PROCESSING_TYPES:
        return check_flow_key((), path, value_text)
    if _flow_shaped(path):
        found = check_flow_key((), path, value_text)
        return RootProblem(head, found) if isinstance(found, ConfigProblem) else found
    return None


def _under_ipf(path: tuple[str, ...], value_text: str) -> Finding:
    if len(path) < 2:
        return None
    if path[1] == "flow":
        if len(path) == 2:
            return ConfigProblem(
                "ipf.flow", value_text, f"ipf.flow must be an object of keys {_ACTION_FORM}"
            )
        return check_flow_key(_IPF_FLOW, path[2:], value_text)
    if is_near(path[1], ("flow",), cutoff=0.75):
        fixed = format_key((*_IPF_FLOW, *path[2:]))
        return ConfigProblem(
            format_key(path),
            value_text,
            f"{_IPF}.{path[1]} is not read: flow keys live under ipf.flow; did you mean {fixed}?",
            suggestion=fixed,
        )
    return None  # IPF's own settings


def _flow_shaped(path: tuple[str, ...]) -> bool:
    if any(_is_processing_time(part) for part in path[1:-1]):
        return True
    aliases = {**_TYPE_ALIASES, **_PROCESSING_ALIASES}
    return closest(path[-1], ALL_TYPES, aliases, 0.75, shared_words=False) is not None


def _is_processing_time(part: str) -> bool:
    """``processing-time``, or a near miss of it (``processing-times``, ``processing_time``);
    a PascalCase name (``ProcessingTime``) is a flow or state name, not the keyword."""
    if part == PROCESSING_TIME:
        return True
    return not _PASCAL.fullmatch(part) and is_near(part, (PROCESSING_TIME,)) is not None


def check_flow_key(
    prefix: tuple[str, ...], parts: tuple[str, ...], value_text: str
) -> ActionPath | ProcessingPath | ConfigProblem:
    """``prefix + parts`` read strictly as an action or processing-time key (``parts`` after
    ``ipf.flow`` for that form, the whole key for the root form)."""
    where = next((i for i, p in enumerate(parts[:-1]) if _is_processing_time(p)), None)
    if where is not None:
        return _processing(prefix, parts, where, value_text)
    return _action(prefix, parts, value_text)


def _action(
    prefix: tuple[str, ...], parts: tuple[str, ...], value_text: str
) -> ActionPath | ConfigProblem:
    key = format_key((*prefix, *parts))
    *names, type_name = parts
    form = KeyForm.IPF_FLOW if prefix else KeyForm.ROOT
    wildcards = [ANY if n.lower() == ANY.lower() else n for n in names]
    kind = (
        type_name if type_name in ACTION_TYPES else closest(type_name, ACTION_TYPES, _TYPE_ALIASES)
    )
    if len(names) == 3 and type_name == kind and wildcards == names:
        flow, state, action = names
        return ActionPath(flow, state, action, ActionType(type_name), form, key)
    reasons = []
    if wildcards != names:
        reasons.append("the wildcard is spelt Any")
    if type_name != kind:
        if kind is not None:
            reasons.append(f"unknown type {type_name!r}")
        elif type_name in PROCESSING_TYPES:
            reasons.append(
                f"{type_name} is a processing-time type (keys {_PROCESSING_FORM}); "
                f"action types are {_valid_types()}"
            )
        else:
            reasons.append(f"unknown type {type_name!r}; valid types are {_valid_types()}")
    fixed, other = _fix_depth(wildcards)
    if len(names) != 3:
        reasons.append(_depth_reason(len(names), prefix, other, kind))
    return _problem(key, value_text, reasons, (*prefix, *fixed, kind) if kind else None)


def _fix_depth(names: list[str]) -> tuple[list[str], list[str] | None]:
    """``names`` made three long (flow, state, action); the other plausible fix, if any."""
    if len(names) == 0:
        return [ANY, ANY, ANY], None
    if len(names) == 1:
        return [names[0], ANY, ANY], None
    if len(names) == 2:
        flow, name = names
        as_state, as_action = [flow, name, ANY], [flow, ANY, name]
        if _STATE_NAME.match(name):
            return as_state, as_action
        return as_action, as_state
    return names[:3], None


def _depth_reason(
    count: int, prefix: tuple[str, ...], other: list[str] | None, kind: str | None
) -> str:
    form = f"{'ipf.flow.' if prefix else ''}{_ACTION_FORM}"
    if count < 3:
        missing = 3 - count
        text = f"{missing} level{'s' if missing > 1 else ''} missing: action keys are {form}"
        if other is not None and kind is not None:
            text += f" (or, if that name is {'a state' if other[2] == ANY else 'an action'}, "
            text += f"{format_key((*prefix, *other, kind))})"
        return text
    extra = count - 3
    return f"{extra} level{'s' if extra > 1 else ''} too many: action keys are {form}"


def _processing(
    prefix: tuple[str, ...], parts: tuple[str, ...], where: int, value_text: str
) -> ProcessingPath | ConfigProblem:
    key = format_key((*prefix, *parts))
    reasons = []
    spelt = parts[where]
    if spelt != PROCESSING_TIME:
        reasons.append(f"unknown name {spelt!r} (processing-time)")
    if not prefix:
        reasons.append("processing-time keys live under ipf.flow")
    if where != 1:
        reasons.append("processing-time comes right after the flow name")
    others = [*parts[:where], *parts[where + 1 :]]
    type_name = others[-1]
    kind = (
        type_name
        if type_name in PROCESSING_TYPES
        else closest(type_name, PROCESSING_TYPES, _PROCESSING_ALIASES)
    )
    if type_name != kind:
        valid = ", ".join(sorted(PROCESSING_TYPES))
        reasons.append(f"unknown processing-time type {type_name!r}; valid types are {valid}")
    fixed = None
    if len(others) == 4:
        flow, source, destination, _ = others
        if not reasons and prefix == _IPF_FLOW:
            return ProcessingPath(flow, source, destination, ProcessingType(type_name), key)
        if kind is not None:
            fixed = (*_IPF_FLOW, flow, PROCESSING_TIME, source, destination, kind)
    else:
        names = len(others) - 2
        reasons.append(
            f"processing-time is not a state: keys are {_PROCESSING_FORM}, but {names} name"
            f"{'' if names == 1 else 's'} after processing-time, expected 2 (source, destination)"
        )
    return _problem(key, value_text, reasons, fixed)


def _problem(
    key: str, value_text: str, reasons: list[str], fixed: tuple[str, ...] | None
) -> ConfigProblem:
    meant = format_key(fixed) if fixed else None
    message = "; ".join(reasons)
    if meant is not None and meant != key:
        message += f"; did you mean {meant}?"
    return ConfigProblem(key, value_text, message, suggestion=meant if meant != key else None)


def _valid_types() -> str:
    return ", ".join(ActionType)
