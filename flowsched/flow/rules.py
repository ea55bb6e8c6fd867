"""What the flow domain reads from the scheduling configuration.

``flowsched.SchedulingConfig`` satisfies :class:`SchedulingRules`; the domain depends on no
more than these calls (so a test or another configuration source can stand in for it).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Protocol

__all__ = [
    "ActionRules",
    "ConfiguredActionKey",
    "ConfiguredProcessingKey",
    "Explained",
    "ProcessingRules",
    "RetryRules",
    "SchedulingRules",
]


class RetryRules(Protocol):
    @property
    def max_retries(self) -> int: ...

    def delay(self, n: int, rng: random.Random | None = None) -> timedelta: ...


class ActionRules(Protocol):
    @property
    def timeout(self) -> timedelta | None: ...

    @property
    def retry(self) -> RetryRules: ...


class ProcessingRules(Protocol):
    @property
    def timeout(self) -> timedelta: ...

    @property
    def offset_id(self) -> str | None: ...


class ExplainedType(Protocol):
    @property
    def key(self) -> str | None: ...


class Explained(Protocol):
    def __getitem__(self, kind: str) -> ExplainedType: ...


class ConfiguredActionKey(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def flow(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def action(self) -> str: ...


class ConfiguredProcessingKey(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def flow(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def destination(self) -> str: ...


class SchedulingRules(Protocol):
    def action(self, flow: str, state: str, action: str) -> ActionRules: ...

    def processing_times_from(self, flow: str, source: str) -> Mapping[str, ProcessingRules]: ...

    def explain(self, flow: str, state: str, action: str) -> Explained: ...

    def action_keys(self) -> Sequence[ConfiguredActionKey]: ...

    def processing_time_keys(self) -> Sequence[ConfiguredProcessingKey]: ...
