"""Internal: retry backoff — the wait before each retry of an action, and when each is due.

Pure policy: no clock, no I/O. The flow domain asks a
:class:`RetryPolicy` for the wait before retry ``n`` and schedules it through the port.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from flowsched.durations import format_duration, hocon_text, parse_duration
from flowsched.errors import ConfigError

__all__ = [
    "BackoffType",
    "RetryPolicy",
    "parse_backoff_type",
    "parse_backoffs",
    "parse_flag",
    "parse_jitter_factor",
    "finite_number",
    "parse_max_retries",
    "whole_number",
]

_MAX_MICROS = timedelta.max // timedelta(microseconds=1)
_PRECOMPUTED = 32
"""Retries whose jitter bounds a policy works out once, when it is made (later ones on demand)."""
_WHOLE = re.compile(r"\s*\+?\d+\s*")
_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}


class BackoffType(StrEnum):
    """How the wait grows from one retry to the next."""

    EXPONENTIAL = "EXPONENTIAL"
    """``initial * 2**(n-1)``: 1, 2, 4, 8 s for 1 s. The default."""
    LINEAR = "LINEAR"
    """``initial * n``: 1, 2, 3, 4 s for 1 s."""
    USER_DEFINED = "USER_DEFINED"
    """``custom_backoffs[n-1]``, the last one repeating."""


# --- value parsers: shared by the model below and by the configuration loader -------------
# Each takes a raw configuration value and returns the typed value, or raises ValueError
# whose message says what would be valid (the caller adds the key and the value).


def whole_number(value: object, least: int) -> int | None:
    """``value`` as a whole number >= ``least`` (an int, or a string of digits as HOCON
    may quote it), ``None`` when it is not one.

    >>> whole_number(" 3 ", 1), whole_number(0, 1), whole_number(True, 0), whole_number("2.5", 0)
    (3, None, None, None)
    """
    if isinstance(value, str) and _WHOLE.fullmatch(value):
        try:
            value = int(value)
        except ValueError:  # more digits than Python converts (4,300): no count is that big
            return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= least:
        return value
    return None


MAX_RETRIES = 10_000
"""The most retries one action may have: more is a typo (a retry schedule is worked out and
listed retry by retry, by ``delays()`` and ``flowsched backoff``, so a count of 10**25
would never finish), and a flow that must wait longer needs a longer wait, not more of them."""


def parse_max_retries(value: object) -> int:
    """A whole number from 0 to :data:`MAX_RETRIES` (an int, or a string of digits as HOCON
    allows)."""
    found = whole_number(value, 0)
    if found is None:
        raise ValueError("must be a whole number >= 0 (0 means no retries)")
    if found > MAX_RETRIES:
        raise ValueError(f"must be a whole number >= 0 and at most {MAX_RETRIES}")
    return found


def finite_number(value: object) -> float | None:
    """``value`` as a finite float (an int or float, or a numeric string as HOCON may quote
    it), ``None`` when it is not one.

    >>> finite_number(" 2 "), finite_number(1), finite_number("nan"), finite_number(True)
    (2.0, 1.0, None, None)
    """
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int beyond a float
            return None
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    return number if number is not None and math.isfinite(number) else None


def parse_jitter_factor(value: object) -> float:
    """A number in [0, 1] (an int or float, or a numeric string)."""
    number = finite_number(value)
    if number is None or not 0 <= number <= 1:
        raise ValueError("must be a number from 0 to 1 (0.2 means +/-20%)")
    return number


def parse_flag(value: object) -> bool:
    """A boolean: ``true``/``false`` (also ``yes``/``no``/``on``/``off``, as HOCON allows)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("must be true or false")


def parse_backoff_type(value: object) -> BackoffType:
    """One of the :class:`BackoffType` names (case does not matter)."""
    if isinstance(value, BackoffType):
        return value
    if isinstance(value, str):
        try:
            return BackoffType(value.strip().upper())
        except ValueError:
            pass
    valid = ", ".join(kind.value for kind in BackoffType)
    raise ValueError(f"unknown backoff type; valid types are {valid}")


def parse_backoffs(value: object) -> tuple[timedelta, ...]:
    """A non-empty list of durations, e.g. ``[10s, 30m]``."""
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list of durations such as [10s, 30m]")
    if not value:
        raise ValueError("must not be empty: give at least one duration, e.g. [10s, 30m]")
    waits = []
    for index, item in enumerate(value, start=1):
        try:
            waits.append(parse_duration(item))
        except ConfigError as exc:
            problem = exc.problems[0]
            raise ValueError(f"entry {index} ({problem.value}): {problem.message}") from None
    return tuple(waits)


def _duration(value: object) -> timedelta:
    return parse_duration(value)


def _optional_backoffs(value: object) -> tuple[timedelta, ...] | None:
    return None if value is None else parse_backoffs(value)


Duration = Annotated[timedelta, BeforeValidator(_duration)]


class RetryPolicy(BaseModel):
    """How often, and after what waits, an unanswered action is invoked again.

    Fields accept what the configuration accepts: durations as ``timedelta`` or HOCON text
    (a bare number is milliseconds), the backoff type by name. Invalid values raise
    ``pydantic.ValidationError`` (a ``ValueError``).

    >>> policy = RetryPolicy(max_retries=4, initial_interval=1000, backoff_type="LINEAR")
    >>> [d.seconds for d in policy.delays()]
    [1, 2, 3, 4]
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: Annotated[int, BeforeValidator(parse_max_retries)] = 0
    initial_interval: Duration = timedelta(seconds=1)
    backoff_type: Annotated[BackoffType, BeforeValidator(parse_backoff_type)] = (
        BackoffType.EXPONENTIAL
    )
    custom_backoffs: Annotated[
        tuple[timedelta, ...] | None, BeforeValidator(_optional_backoffs)
    ] = None
    jitter_enabled: Annotated[bool, BeforeValidator(parse_flag)] = True
    jitter_factor: Annotated[float, BeforeValidator(parse_jitter_factor)] = 0.2

    @model_validator(mode="after")
    def _custom_backoffs_for_user_defined(self) -> Self:
        if self.backoff_type is BackoffType.USER_DEFINED and not self.custom_backoffs:
            raise ValueError("backoff type USER_DEFINED needs custom_backoffs, e.g. [10s, 30m]")
        return self

    def model_post_init(self, context: Any, /) -> None:
        # The jitter bounds of the first retries, worked out once: delay() is on the flow
        # domain's hot path. Kept outside the fields (equality, hashing, dumps ignore it).
        bounds: tuple[tuple[int, int], ...] = ()
        # Runs before the model validator: USER_DEFINED without custom_backoffs is left to it
        # (its message names the field; the bounds would have failed an assertion first).
        unchecked = self.backoff_type is BackoffType.USER_DEFINED and not self.custom_backoffs
        if self.jitter_enabled and self.jitter_factor != 0 and not unchecked:
            top = min(self.max_retries, _PRECOMPUTED)
            bounds = tuple(self._jitter_bounds(self._base_delay(n)) for n in range(1, top + 1))
        object.__setattr__(self, "_bounds", bounds)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (see pydantic); the precomputed jitter bounds follow the updated fields."""
        copy = super().model_copy(update=update, deep=deep)
        copy.model_post_init(None)
        return copy

    def delay(self, n: int, rng: random.Random | None = None) -> timedelta:
        """The wait before retry ``n`` (1-based), measured from the previous attempt.

        Without jitter: EXPONENTIAL ``initial * 2**(n-1)``, LINEAR ``initial * n``,
        USER_DEFINED ``custom_backoffs[min(n, len) - 1]``. With jitter enabled the result is a
        whole number of microseconds in ``[d*(1-f), d*(1+f)]``, drawn from ``rng`` when given
        (else from the :mod:`random` module). Waits too long for a ``timedelta`` saturate at
        ``timedelta.max``.
        """
        bounds: tuple[tuple[int, int], ...] = self.__dict__.get("_bounds", ())
        if 0 < n <= len(bounds):
            low, high = bounds[n - 1]
        else:
            base = self._base_delay(n)
            if not self.jitter_enabled or self.jitter_factor == 0:
                return base
            low, high = self._jitter_bounds(base)
        return timedelta(microseconds=(rng or random).randint(low, high))

    def delays(self) -> list[timedelta]:
        """The ``max_retries`` waits, without jitter."""
        return [self._base_delay(n) for n in range(1, self.max_retries + 1)]

    def jitter_range(self, n: int) -> tuple[timedelta, timedelta]:
        """The smallest and largest wait :meth:`delay` can return for retry ``n``."""
        base = self._base_delay(n)
        if not self.jitter_enabled or self.jitter_factor == 0:
            return base, base
        low, high = self._jitter_bounds(base)
        return timedelta(microseconds=low), timedelta(microseconds=high)

    def next_due(
        self,
        n: int,
        previous: datetime,
        deadline: datetime | None = None,
        rng: random.Random | None = None,
    ) -> datetime | None:
        """When retry ``n`` is due after the attempt at ``previous``, or ``None``.

        ``None`` when ``n`` exceeds ``max_retries``, or the retry would fall at or after
        ``deadline`` (the action timeout: first invocation + timeout-duration).
        """
        if n > self.max_retries:
            return None
        try:
            due = previous + self.delay(n, rng)
        except OverflowError:  # beyond the year 9999: never
            return None
        if deadline is not None and due >= deadline:
            return None
        return due

    def due_times(
        self,
        t0: datetime,
        timeout: timedelta | None = None,
        rng: random.Random | None = None,
    ) -> list[datetime]:
        """Due times of every retry for an action first invoked at ``t0``.

        Retry ``n`` is due at ``due(n-1) + delay(n)`` with ``due(0) = t0``. With a
        ``timeout``, a retry at or after ``t0 + timeout`` is dropped, and so is every later one.

        >>> from datetime import UTC
        >>> t0 = datetime(2024, 1, 1, tzinfo=UTC)
        >>> policy = RetryPolicy(max_retries=4, jitter_enabled=False)
        >>> [(d - t0).seconds for d in policy.due_times(t0, timeout=timedelta(seconds=10))]
        [1, 3, 7]
        """
        if t0.tzinfo is None:
            raise ValueError(f"t0 must be timezone-aware (got naive {t0.isoformat()})")
        deadline: datetime | None = None
        if timeout is not None:
            try:
                deadline = t0 + timeout
            except OverflowError:
                deadline = None
        times: list[datetime] = []
        previous = t0
        for n in range(1, self.max_retries + 1):
            due = self.next_due(n, previous, deadline, rng)
            if due is None:
                break
            times.append(due)
            previous = due
        return times

    def describe(self) -> str:
        """One line for logs and the command line, e.g. ``LINEAR 1s x4, jitter 20%``."""
        if self.backoff_type is BackoffType.USER_DEFINED and self.custom_backoffs:
            start = hocon_text(list(self.custom_backoffs))
        else:
            start = format_duration(self.initial_interval)
        jitter = f"jitter {self.jitter_factor:.0%}" if self.jitter_enabled else "no jitter"
        return f"{self.backoff_type.value} {start} x{self.max_retries}, {jitter}"

    def _base_delay(self, n: int) -> timedelta:
        if n < 1:
            raise ValueError(f"retry numbers start at 1 (got {n})")
        if self.backoff_type is BackoffType.USER_DEFINED:
            assert self.custom_backoffs  # the model validator guarantees it
            return self.custom_backoffs[min(n, len(self.custom_backoffs)) - 1]
        initial = self.initial_interval // timedelta(microseconds=1)
        if self.backoff_type is BackoffType.LINEAR:
            micros = initial * n
        else:
            # 2**(n-1) for a large n is a huge int; anything past timedelta.max saturates.
            micros = initial << (n - 1) if n <= 64 else (_MAX_MICROS + 1 if initial else 0)
        return timedelta(microseconds=min(micros, _MAX_MICROS))

    def _jitter_bounds(self, base: timedelta) -> tuple[int, int]:
        # Exact integer arithmetic on the factor's exact ratio f = p/q (a float is one): the
        # bounds are the whole microseconds inside [d*(1-f), d*(1+f)].
        micros = base // timedelta(microseconds=1)
        p, q = self.jitter_factor.as_integer_ratio()
        low = -(-micros * (q - p) // q)  # ceil
        high = min(micros * (q + p) // q, _MAX_MICROS)
        return (low, high) if low <= high else (micros, micros)
