"""Internal: the names of our keys (the types an action or processing-time key sets, and
where a key is written).

Two shapes are ours:

* action keys ``<Flow>.<State>.<Action>.<type>``, at the root or under ``ipf.flow.``;
* processing-time keys ``ipf.flow.<flow>.processing-time.<source>.<destination>.<type>``.

Which keys of a file are ours, and what is wrong with those that do not fit, is decided in
:mod:`flowsched.config.ownership`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ACTION_TYPES",
    "ALL_TYPES",
    "ANY",
    "PROCESSING_TIME",
    "PROCESSING_TYPES",
    "ActionPath",
    "ActionType",
    "KeyForm",
    "ProcessingPath",
    "ProcessingType",
]

ANY = "Any"
"""The wildcard: matches every flow, state or action in its position."""

PROCESSING_TIME = "processing-time"


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


ACTION_TYPES: frozenset[str] = frozenset(ActionType)
PROCESSING_TYPES: frozenset[str] = frozenset(ProcessingType)
ALL_TYPES: frozenset[str] = ACTION_TYPES | PROCESSING_TYPES
"""Every type name; objects under these names are values, not sub-trees."""
