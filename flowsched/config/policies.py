"""Internal: the validated values a configuration resolves to (what the flow domain acts on)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from flowsched.backoff import RetryPolicy
from flowsched.durations import format_duration, parse_duration

__all__ = ["ActionPolicy", "ProcessingTimePolicy"]

_ZERO = timedelta(0)


def _duration(value: object) -> timedelta:
    return parse_duration(value)


def _offset_id(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return value
    raise ValueError("must be a non-empty string naming an offset (a state name or a custom id)")


@dataclass(frozen=True, slots=True)
class ActionPolicy:
    """Timeout and retries for one action of one state of one flow.

    ``timeout`` (``None``: the action never times out) counts from the first invocation.
    Retries are due at the previous attempt plus :meth:`RetryPolicy.delay`; one that would
    fall at or after the timeout is not scheduled (:meth:`retry_due_times`).

    A frozen dataclass rather than a pydantic model because one is built on every first
    look-up of an action; its parts are validated (``timeout`` accepts what
    :func:`~flowsched.durations.parse_duration` accepts, ``retry`` is a validated model).
    """

    flow: str
    state: str
    action: str
    timeout: timedelta | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        if self.timeout is not None and not (
            type(self.timeout) is timedelta and self.timeout >= _ZERO
        ):
            object.__setattr__(self, "timeout", parse_duration(self.timeout, "timeout"))
        if not isinstance(self.retry, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy, not {type(self.retry).__name__}")

    @classmethod
    def resolved(
        cls, flow: str, state: str, action: str, timeout: timedelta | None, retry: RetryPolicy
    ) -> ActionPolicy:
        """Build from values a loaded configuration already validated (no re-checking)."""
        policy: ActionPolicy = object.__new__(cls)
        for name, value in (
            ("flow", flow),
            ("state", state),
            ("action", action),
            ("timeout", timeout),
            ("retry", retry),
        ):
            object.__setattr__(policy, name, value)
        return policy

    def deadline(self, first_invocation: datetime) -> datetime | None:
        """When the action times out if first invoked at ``first_invocation``; ``None``: never."""
        if self.timeout is None:
            return None
        try:
            return first_invocation + self.timeout
        except OverflowError:
            return None

    def next_retry_due(
        self,
        n: int,
        previous_attempt: datetime,
        first_invocation: datetime,
        rng: random.Random | None = None,
    ) -> datetime | None:
        """When retry ``n`` is due, or ``None`` (no retries left, or at/after the timeout)."""
        return self.retry.next_due(n, previous_attempt, self.deadline(first_invocation), rng)

    def retry_due_times(self, t0: datetime, rng: random.Random | None = None) -> list[datetime]:
        """Due times of every retry for a first invocation at ``t0``, cut off at the timeout."""
        return self.retry.due_times(t0, self.timeout, rng)

    def describe(self) -> str:
        """One line for logs, e.g. ``F.S.A: timeout 10s; retries EXPONENTIAL 1s x3, ...``."""
        timeout = format_duration(self.timeout) if self.timeout is not None else "none"
        return f"{self.flow}.{self.state}.{self.action}: timeout {timeout}; retries " + (
            self.retry.describe()
        )


class ProcessingTimePolicy(BaseModel):
    """How long a flow may take from entering ``source`` to reaching ``destination``.

    The deadline counts from the offset named ``offset_id`` when set, else from the time
    ``source`` was entered.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    flow: str
    source: str
    destination: str
    timeout: Annotated[timedelta, BeforeValidator(_duration)]
    offset_id: Annotated[str | None, BeforeValidator(_offset_id)] = None

    def deadline(self, offset_time: datetime) -> datetime:
        """``offset_time + timeout``: when the processing-time event is due."""
        return offset_time + self.timeout
