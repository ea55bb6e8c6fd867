"""Internal: named business calendars, from ``ipf-scheduler.calendars`` of a config.

::

    ipf-scheduler.calendars {
      target2 {
        timezone = "Europe/Berlin"    # default UTC
        weekdays-off = [SAT, SUN]     # names (any case) or numbers, Monday 0
        dates-off = ["2026-12-24"]    # ISO dates
        holidays = [ECB]              # calendars of the holidays package: ECB, NYSE, DE, DE-BY
      }
    }

Each value is checked as :class:`~flowsched.Calendar` checks it; a bad one is a
:class:`~flowsched.ConfigProblem` naming its full key (``ipf-scheduler.calendars.target2.
holidays``), an unknown key one that names the key meant. A scheduler built from the config
(``from_config``) resolves ``Recurrence(..., calendar="target2")`` against these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowsched.calendar import Calendar
from flowsched.config.hocon import format_key
from flowsched.config.suggest import closest
from flowsched.durations import hocon_text
from flowsched.errors import ConfigProblem

__all__ = ["CALENDARS", "read_calendars"]

CALENDARS = "calendars"
"""The section of ``ipf-scheduler`` that names calendars."""

_KEYS: Mapping[str, str] = {
    "timezone": "timezone",
    "weekdays-off": "weekdays_off",
    "dates-off": "dates_off",
    "holidays": "holidays",
}
_LISTS = frozenset({"weekdays_off", "dates_off", "holidays"})
_EXAMPLE = 'target2 { timezone = "Europe/Berlin", weekdays-off = [SAT, SUN], holidays = [ECB] }'


def read_calendars(
    section: object, path: tuple[str, ...], problems: list[ConfigProblem]
) -> dict[str, Calendar]:
    """The calendars of ``section`` (the ``calendars`` object at ``path``), by name; each
    problem found is added to ``problems`` (a calendar with one is left out)."""
    from pyhocon import ConfigTree

    if not isinstance(section, ConfigTree):
        problems.append(_problem(path, section, f"must be an object ({_EXAMPLE})"))
        return {}
    calendars: dict[str, Calendar] = {}
    for raw_name, block in section.items():
        name = raw_name.strip('"')
        found = _calendar(name, block, (*path, name), problems)
        if found is not None:
            calendars[name] = found
    return calendars


def _calendar(
    name: str, block: object, path: tuple[str, ...], problems: list[ConfigProblem]
) -> Calendar | None:
    from pyhocon import ConfigTree

    if not isinstance(block, ConfigTree):
        problems.append(
            _problem(path, block, "must be an object (timezone, weekdays-off, dates-off, holidays)")
        )
        return None
    arguments: dict[str, Any] = {}
    before = len(problems)
    for raw_key, value in block.items():
        key = raw_key.strip('"')
        attribute = _KEYS.get(key)
        if attribute is None:
            problems.append(_unknown((*path, key), closest(key, _KEYS)))
            continue
        if attribute in _LISTS and isinstance(value, str):
            value = [value]  # `holidays = ECB`: one name
        if attribute in _LISTS and not isinstance(value, list):
            problems.append(_problem((*path, key), value, "must be a list ([SAT, SUN])"))
            continue
        try:
            Calendar(**{attribute: value})  # checked alone, so that the problem names its key
        except (ValueError, TypeError) as exc:  # MissingHolidays is a ValueError
            problems.append(_problem((*path, key), value, str(exc)))
            continue
        arguments[attribute] = value
    if len(problems) > before:
        return None
    return Calendar(name=name, **arguments)


def _problem(path: tuple[str, ...], value: object, message: str) -> ConfigProblem:
    return ConfigProblem(format_key(path), hocon_text(value), message)


def _unknown(path: tuple[str, ...], meant: str | None) -> ConfigProblem:
    key = format_key(path)
    valid = ", ".join(_KEYS)
    if meant is None:
        return ConfigProblem(key, None, f"unknown calendar setting {path[-1]!r} (valid: {valid})")
    fixed = format_key((*path[:-1], meant))
    return ConfigProblem(
        key, None, f"unknown calendar setting {path[-1]!r}; did you mean {fixed}?", fixed
    )
