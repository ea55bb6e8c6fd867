"""Internal: turns a parsed HOCON tree into indexed, validated keys and the problems found.

Everything is checked at once, so one :class:`~flowsched.errors.ConfigError` can list every
problem in the file instead of the first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import MappingProxyType
from typing import cast

from pyhocon import ConfigTree

from flowsched.backoff import (
    BackoffType,
    parse_backoff_type,
    parse_backoffs,
    parse_flag,
    parse_jitter_factor,
    parse_max_retries,
)
from flowsched.config.hocon import flatten, format_key
from flowsched.config.keys import (
    ALL_TYPES,
    ActionPath,
    ActionType,
    ProcessingPath,
    ProcessingType,
)
from flowsched.config.ownership import RootProblem, classify
from flowsched.config.policies import ProcessingTimePolicy
from flowsched.config.resolution import ActionIndex, ActionKey
from flowsched.config.scheduler_settings import SchedulerSettings, read_scheduler_settings
from flowsched.durations import hocon_text, parse_duration
from flowsched.errors import ConfigError, ConfigProblem

__all__ = ["Compiled", "ProcessingTimeKey", "compile_tree"]

_Parser = Callable[[object], object]
_ACTION_PARSERS: dict[ActionType, _Parser] = {
    ActionType.TIMEOUT_DURATION: parse_duration,
    ActionType.INITIAL_RETRY_INTERVAL: parse_duration,
    ActionType.MAX_RETRIES: parse_max_retries,
    ActionType.BACKOFF_TYPE: parse_backoff_type,
    ActionType.CUSTOM_BACKOFFS: parse_backoffs,
    ActionType.JITTER_ENABLED: parse_flag,
    ActionType.JITTER_FACTOR: parse_jitter_factor,
}


def _parse_offset_id(value: object) -> object:
    if isinstance(value, str) and value.strip():
        return value
    raise ValueError("must be a non-empty string naming an offset (a state name or a custom id)")


_PROCESSING_PARSERS: dict[ProcessingType, _Parser] = {
    ProcessingType.TIMEOUT_DURATION: parse_duration,
    ProcessingType.OFFSET_ID: _parse_offset_id,
}


@dataclass(frozen=True, slots=True)
class ProcessingTimeKey:
    """One configured, validated processing-time key."""

    flow: str
    source: str
    destination: str
    type: ProcessingType
    key: str
    value: object
    text: str


@dataclass(frozen=True, slots=True)
class Compiled:
    """What a configuration holds, indexed for look-ups, and what is wrong with it.

    ``errors`` are invalid values (always fatal); ``key_problems`` are keys of ours that do
    not fit (near misses, wrong depth, unknown types): fatal unless the configuration is
    loaded with ``strict=False``. ``root_problems`` are root keys that do not fit and may be
    another library's (see :mod:`flowsched.config.ownership`); ``flow_shaped`` counts the keys
    that are, or look like, ours.
    """

    actions: ActionIndex
    action_keys: tuple[ActionKey, ...]
    processing: MappingProxyType[tuple[str, str, str], ProcessingTimePolicy]
    processing_keys: tuple[ProcessingTimeKey, ...]
    errors: tuple[ConfigProblem, ...]
    key_problems: tuple[ConfigProblem, ...]
    root_problems: tuple[RootProblem, ...] = ()
    flow_shaped: int = 0
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)


def compile_tree(tree: ConfigTree) -> Compiled:
    """Classify, parse and index every key of ``tree``; collect every problem."""
    action_keys: list[ActionKey] = []
    processing_keys: list[ProcessingTimeKey] = []
    errors: list[ConfigProblem] = []
    key_problems: list[ConfigProblem] = []
    root_problems: list[RootProblem] = []
    flow_shaped = 0
    for path, raw in flatten(tree, stop_at=ALL_TYPES):
        found = classify(path, hocon_text(raw))
        # A lower-case root block that does not fit is most likely a library's: not counted.
        flow_shaped += found is not None and (
            not isinstance(found, RootProblem) or found.named_like_a_flow
        )
        if isinstance(found, ConfigProblem):
            key_problems.append(found)
        elif isinstance(found, RootProblem):
            root_problems.append(found)
        elif isinstance(found, ActionPath):
            value = _parse(_ACTION_PARSERS[found.type], raw, found.key, errors)
            if value is not _INVALID:
                action_keys.append(_action_key(found, value, raw))
        elif isinstance(found, ProcessingPath):
            value = _parse(_PROCESSING_PARSERS[found.type], raw, found.key, errors)
            if value is not _INVALID:
                processing_keys.append(_processing_key(found, value, raw))
    actions = ActionIndex(action_keys)
    errors.extend(_user_defined_without_backoffs(actions))
    processing = _processing_policies(processing_keys, errors)
    scheduler, scheduler_problems = read_scheduler_settings(tree)
    errors.extend(scheduler_problems)
    return Compiled(
        actions,
        tuple(action_keys),
        MappingProxyType(processing),
        tuple(processing_keys),
        tuple(errors),
        tuple(key_problems),
        tuple(root_problems),
        flow_shaped,
        scheduler,
    )


_INVALID = object()


def _parse(parser: _Parser, raw: object, key: str, errors: list[ConfigProblem]) -> object:
    try:
        return parser(raw)
    except ConfigError as exc:  # from parse_duration, which did not know the key
        errors.extend(replace(problem, key=key) for problem in exc.problems)
    except ValueError as exc:
        errors.append(ConfigProblem(key, hocon_text(raw), str(exc)))
    return _INVALID


def _action_key(path: ActionPath, value: object, raw: object) -> ActionKey:
    return ActionKey(
        path.flow, path.state, path.action, path.type, path.form, path.key, value, hocon_text(raw)
    )


def _processing_key(path: ProcessingPath, value: object, raw: object) -> ProcessingTimeKey:
    return ProcessingTimeKey(
        path.flow, path.source, path.destination, path.type, path.key, value, hocon_text(raw)
    )


def _user_defined_without_backoffs(actions: ActionIndex) -> list[ConfigProblem]:
    """USER_DEFINED must find custom-backoffs at the same key or one that is more general.

    Checked on the resolved settings of every configured triple: a triple resolves its
    custom-backoffs from itself and the keys more general than it (those with ``Any`` in
    more places), which also apply to every action it applies to. So if every configured
    triple passes, every action that resolves USER_DEFINED finds custom-backoffs.
    """
    problems = []
    for triple in actions.triples():
        won = actions.winners(*triple)
        backoff = won.get(ActionType.BACKOFF_TYPE)
        if backoff is None or backoff.value is not BackoffType.USER_DEFINED:
            continue
        if ActionType.CUSTOM_BACKOFFS in won or backoff.triple != triple:
            continue  # a more general key's problem is reported once, at its own triple
        where = format_key((*triple, ActionType.CUSTOM_BACKOFFS.value))
        problems.append(
            ConfigProblem(
                backoff.key,
                backoff.text,
                f"USER_DEFINED needs custom-backoffs for the same actions: set {where} = "
                "[10s, 30m] (or at a key with Any that covers them)",
            )
        )
    return problems


def _processing_policies(
    keys: list[ProcessingTimeKey], errors: list[ConfigProblem]
) -> dict[tuple[str, str, str], ProcessingTimePolicy]:
    grouped: dict[tuple[str, str, str], dict[ProcessingType, ProcessingTimeKey]] = {}
    for key in keys:
        grouped.setdefault((key.flow, key.source, key.destination), {})[key.type] = key
    policies = {}
    for (flow, source, destination), types in grouped.items():
        timeout = types.get(ProcessingType.TIMEOUT_DURATION)
        if timeout is None:
            offset = types[ProcessingType.OFFSET_ID]
            errors.append(
                ConfigProblem(
                    offset.key,
                    offset.text,
                    "offset-id without a timeout-duration for the same source and destination",
                )
            )
            continue
        offset_key = types.get(ProcessingType.OFFSET_ID)
        policies[(flow, source, destination)] = ProcessingTimePolicy(
            flow=flow,
            source=source,
            destination=destination,
            timeout=cast(timedelta, timeout.value),
            offset_id=cast(str, offset_key.value) if offset_key else None,
        )
    return policies
