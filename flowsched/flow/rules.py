"""What the flow domain reads from the scheduling configuration (temporary structural view).

``SchedulingConfig`` satisfies this; the domain depends on no more than these calls.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol

__all__ = ["ActionRules", "ProcessingRules", "RetryRules", "SchedulingRules"]


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


class SchedulingRules(Protocol):
    def action(self, flow: str, state: str, action: str) -> ActionRules: ...

    def processing_times_from(self, flow: str, source: str) -> Mapping[str, ProcessingRules]: ...
