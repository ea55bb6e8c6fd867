"""Internal: HOCON durations (``2s``, ``1.5 minutes``, a bare number of ms) as ``timedelta``.

pyhocon converts some duration literals while parsing and leaves others as text: ``2s``,
``500ms``, ``2 seconds`` arrive as ``timedelta``; ``1.5s`` and ``-2s`` as strings; ``1000`` as
an int; ``5ns`` as ``timedelta(0)``. :func:`parse_duration` gives one answer for all of them.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from fractions import Fraction
from typing import Any

from flowsched.errors import ConfigError

__all__ = ["UNITS", "format_duration", "hocon_text", "parse_duration"]

_MICROS_PER: dict[str, Fraction] = {
    "nanoseconds": Fraction(1, 1000),
    "microseconds": Fraction(1),
    "milliseconds": Fraction(1000),
    "seconds": Fraction(1_000_000),
    "minutes": Fraction(60_000_000),
    "hours": Fraction(3_600_000_000),
    "days": Fraction(86_400_000_000),
    "weeks": Fraction(604_800_000_000),
}

UNITS: dict[str, str] = {
    spelling: unit
    for unit, spellings in {
        "nanoseconds": ("ns", "nano", "nanos", "nanosecond", "nanoseconds"),
        "microseconds": ("us", "micro", "micros", "microsecond", "microseconds"),
        "milliseconds": ("ms", "milli", "millis", "millisecond", "milliseconds"),
        "seconds": ("s", "second", "seconds"),
        "minutes": ("m", "minute", "minutes"),
        "hours": ("h", "hour", "hours"),
        "days": ("d", "day", "days"),
        # Not in the HOCON spec, but pyhocon converts them; accepting them keeps a quoted and
        # an unquoted value in agreement.
        "weeks": ("w", "week", "weeks"),
    }.items()
    for spelling in spellings
}
"""Every accepted unit spelling (case-sensitive, as in HOCON) → its unit."""

_DURATION = re.compile(
    r"\s*(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?)\s*(?P<unit>[A-Za-z]*)\s*"
)
_VALID = (
    "a duration is a number and an optional unit (ns, us, ms, s, m, h, d or a long form such "
    "as millis, seconds, minutes, hours, days); a bare number is milliseconds"
)


def parse_duration(value: object, key: str | None = None) -> timedelta:
    """Convert a HOCON duration to a :class:`timedelta`; ``key`` names it in errors.

    * ``"2s"``, ``"2 s"``, ``"1.5s"``, ``"2 seconds"``, ``"500ms"``, ``"30m"`` (minutes), …:
      a number (integer or decimal) and an optional unit, with or without a space.
    * A bare number, an ``int``/``float``, or a string of digits is **milliseconds**:
      ``1000`` and ``"1000"`` are one second.
    * A ``timedelta`` passes through (pyhocon has already converted ``2s``).
    * Resolution is one microsecond (that of ``timedelta``): finer values are rounded to the
      nearest microsecond (``1500ns`` → 2 µs); a non-zero value that would round to zero
      (``5ns``) raises instead of silently becoming "no time at all". pyhocon itself
      truncates ``5ns`` to ``timedelta(0)`` while parsing; :class:`flowsched.SchedulingConfig`
      keeps the literal so the two agree (see :func:`flowsched.config.parse_hocon`).

    Negative, empty, boolean, non-numeric or unknown-unit values raise :class:`ConfigError`
    naming ``key`` and the value.

    >>> parse_duration("1.5s"), parse_duration(1000)
    (datetime.timedelta(seconds=1, microseconds=500000), datetime.timedelta(seconds=1))
    """
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise _error(key, value, "a duration cannot be negative")
        return value
    if isinstance(value, bool):  # bool is an int subclass: true is not 1 ms
        raise _error(key, value, f"a boolean is not a duration; {_VALID}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise _error(key, value, f"not a finite number; {_VALID}")
        return _from_micros(Fraction(value) * 1000, key, value)
    if isinstance(value, str):
        return _parse_text(value, key)
    if _is_relativedelta(value):
        return parse_duration(_fixed_length(value, key), key)
    raise _error(key, value, f"expected a duration; {_VALID}")


def _is_relativedelta(value: object) -> bool:
    # pyhocon returns dateutil's relativedelta instead of timedelta whenever python-dateutil
    # is installed (as it often is); dateutil is not a dependency, so it is recognised by name.
    kind = type(value)
    return kind.__name__ == "relativedelta" and kind.__module__.startswith("dateutil")


def _fixed_length(value: Any, key: str | None) -> timedelta:
    if value.years or value.months:
        raise _error(key, value, f"months and years have no fixed length; {_VALID}")
    try:
        return _days_and_less(value)
    except OverflowError:
        raise _error(key, value, f"too long; the longest duration is {timedelta.max}") from None


def _days_and_less(value: Any) -> timedelta:
    return timedelta(
        days=value.days,
        hours=value.hours,
        minutes=value.minutes,
        seconds=value.seconds,
        microseconds=value.microseconds,
    )


_MAX_TEXT = 64
"""Longest duration text read (the longest duration, in nanoseconds, has 24 digits)."""


def _parse_text(text: str, key: str | None) -> timedelta:
    if not text.strip():
        raise _error(key, text, f"empty; {_VALID}")
    if len(text) > _MAX_TEXT:
        # Also keeps thousands of digits away from int(), which has a digit limit.
        raise _error(key, text, f"too long for a duration ({len(text)} characters); {_VALID}")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise _error(key, text, f"not a duration; {_VALID}")
    unit = match["unit"] or "ms"
    if unit not in UNITS:
        raise _error(key, text, f"unknown unit {unit!r}; {_VALID}")
    number = Fraction(match["number"])
    return _from_micros(number * _MICROS_PER[UNITS[unit]], key, text)


def _from_micros(micros: Fraction, key: str | None, original: object) -> timedelta:
    if micros < 0:
        raise _error(key, original, "a duration cannot be negative")
    whole = round(micros)
    if whole == 0 and micros != 0:
        raise _error(
            key, original, "shorter than 1 microsecond, the resolution of durations; use 0 or 1us"
        )
    try:
        return timedelta(microseconds=whole)
    except OverflowError:
        raise _error(key, original, f"too long; the longest duration is {timedelta.max}") from None


def _error(key: str | None, value: object, message: str) -> ConfigError:
    text = hocon_text(value)
    if len(text) > 2 * _MAX_TEXT:
        text = f"{text[:_MAX_TEXT]}... ({len(text)} characters)"
    return ConfigError.single(message, key=key, value=text)


def format_duration(value: timedelta) -> str:
    """The shortest exact HOCON text for ``value``: ``30m``, ``2h``, ``1.5s``, ``250ms``.

    ``parse_duration(format_duration(d)) == d`` for every non-negative ``d``.
    """
    micros = value // timedelta(microseconds=1)
    if micros < 0:
        return f"-{format_duration(-value)}"
    if micros == 0:
        return "0s"
    for suffix, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000)):
        if micros % size == 0:
            return f"{micros // size}{suffix}"
    if micros % 1_000_000 == 0 or micros >= 1_000_000:
        seconds = f"{micros // 1_000_000}.{micros % 1_000_000:06d}".rstrip("0").rstrip(".")
        return f"{seconds}s"
    if micros % 1000 == 0:
        return f"{micros // 1000}ms"
    return f"{micros}us"


def hocon_text(value: object) -> str:
    """Render a configuration value as HOCON-like text for messages (strings quoted)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(hocon_text(item) for item in value) + "]"
    if isinstance(value, dict):  # a HOCON object (pyhocon's ConfigTree is a dict)
        return "{...}"
    if isinstance(value, int) and value.bit_length() > 128:
        # str() of an int with thousands of digits raises ValueError (the digit limit).
        return f"<a {len(hex(value)) - 2}-hex-digit integer>"
    if _is_relativedelta(value):
        return _relativedelta_text(value)
    return str(value)


def _relativedelta_text(value: Any) -> str:
    calendar = [f"{n}{unit}" for n, unit in ((value.years, "y"), (value.months, "mo")) if n]
    try:
        fixed = _days_and_less(value)
    except OverflowError:
        return f"{value.days} days"
    if calendar:
        return " ".join(calendar + ([format_duration(fixed)] if fixed else []))
    return format_duration(fixed)
