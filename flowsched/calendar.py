"""Internal: business calendars - the days a recurring schedule has no slot on.

A :class:`Calendar` excludes weekdays, single dates and the holiday calendars of the
`holidays <https://pypi.org/project/holidays/>`_ package (``pip install
"flowsched[calendars]"``), each day judged in the calendar's own time zone. A recurrence with
a calendar skips every slot that falls on an excluded day (see
:mod:`flowsched.recurrence`): the slot is dropped, not moved to the next open day.

Pure and light: ``zoneinfo`` and ``holidays`` are imported when first needed, so that
``import flowsched`` stays cheap; holiday dates are computed once per (calendar name, year)
and kept in a small cache shared by every calendar of the process (read-only values).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

__all__ = ["Calendar", "MissingHolidays", "WEEKDAYS"]

WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
"""Weekday names as a calendar writes them, in Python's order (Monday is 0)."""

_FULL_NAMES = ("MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY")
_FINANCIAL_ALIASES = {"TARGET2": "ECB", "TARGET": "ECB"}

LONGEST_CLOSURE = 3660
"""The most consecutive excluded days a recurrence looks past for its next slot (ten years):
past that, the recurrence has no slot left (a calendar that excludes every day)."""


@dataclass(frozen=True, slots=True, init=False)
class Calendar:
    """The days a recurring schedule skips, judged in ``timezone`` (an IANA name).

    ``weekdays_off``: names (``"SAT"``, ``"Sunday"``, any case) or Python weekday numbers
    (Monday 0). ``dates_off``: dates (``date`` objects or ISO strings ``"2026-12-24"``).
    ``holidays``: calendars of the ``holidays`` package - ``"ECB"`` (TARGET2; also
    ``"TARGET2"``), ``"NYSE"`` or another market it knows, or a country code with an optional
    subdivision (``"DE"``, ``"DE-BY"``). ``name``: what it is called in ``application.conf``
    (shown by the tools; not part of its identity: two calendars that exclude the same days
    are equal).

    Frozen, hashable, and stored as JSON (:meth:`to_json`); the fields hold the normalised
    values (weekday numbers, sorted dates, upper-case holiday names). An unknown weekday, time
    zone or holiday calendar is a ``ValueError`` naming it.

    >>> target2 = Calendar(timezone="Europe/Berlin", weekdays_off=("sat", "SUN"))
    >>> target2.weekdays_off
    (5, 6)
    >>> target2.is_open(date(2026, 12, 26))
    False
    """

    timezone: str
    weekdays_off: tuple[int, ...]
    dates_off: tuple[date, ...]
    holidays: tuple[str, ...]
    name: str | None = field(compare=False)

    def __init__(
        self,
        *,
        timezone: str = "UTC",
        weekdays_off: Iterable[int | str] = (),
        dates_off: Iterable[date | str] = (),
        holidays: Iterable[str] = (),
        name: str | None = None,
    ) -> None:
        if not isinstance(timezone, str) or not timezone:
            raise ValueError(
                f"Calendar timezone must be an IANA name such as 'Europe/Berlin' (got {timezone!r})"
            )
        _zone(timezone)
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"Calendar name must be a non-empty string (got {name!r})")
        set_ = object.__setattr__
        set_(self, "timezone", timezone)
        set_(self, "weekdays_off", _weekdays(weekdays_off))
        set_(self, "dates_off", _dates(dates_off))
        set_(self, "holidays", _holiday_names(holidays))
        set_(self, "name", name)
        if len(self.weekdays_off) == len(WEEKDAYS):
            raise ValueError(
                "Calendar weekdays_off excludes every day of the week: a recurrence with it "
                "would never run"
            )

    def is_open(self, day: date) -> bool:
        """Whether a recurrence may have a slot on ``day`` (a local date of this calendar)."""
        if day.weekday() in self.weekdays_off or day in self.dates_off:
            return False
        return not any(day in _holiday_dates(name, day.year) for name in self.holidays)

    def allows(self, instant: datetime) -> bool:
        """Whether ``instant`` (timezone-aware) falls on an open day in this calendar's zone."""
        return self.is_open(instant.astimezone(_zone(self.timezone)).date())

    def next_day_start(self, instant: datetime) -> datetime:
        """The start (in UTC) of the local day after the one ``instant`` falls on: where a
        recurrence looks again after a slot on a closed day."""
        zone = _zone(self.timezone)
        following = instant.astimezone(zone).date() + timedelta(days=1)
        # A local midnight skipped by a DST change reads as the instant the day begins.
        return datetime.combine(following, time(0), tzinfo=zone).astimezone(UTC)

    def day_start(self, instant: datetime) -> datetime:
        """The start (in UTC) of the local day ``instant`` falls on."""
        zone = _zone(self.timezone)
        local = instant.astimezone(zone).date()
        return datetime.combine(local, time(0), tzinfo=zone).astimezone(UTC)

    def describe(self) -> str:
        """A short text for the tools: the name if it has one, else what it excludes."""
        if self.name:
            return self.name
        parts = [",".join(WEEKDAYS[d] for d in self.weekdays_off)] if self.weekdays_off else []
        parts += list(self.holidays)
        if self.dates_off:
            parts.append(f"{len(self.dates_off)} dates")
        return f"{' '.join(parts) or 'open'} {self.timezone}"

    def to_json(self) -> dict[str, Any]:
        """A plain JSON object (stored with a recurring item); :meth:`from_json` reads it."""
        data: dict[str, Any] = {
            "timezone": self.timezone,
            "weekdays_off": [WEEKDAYS[d] for d in self.weekdays_off],
            "dates_off": [d.isoformat() for d in self.dates_off],
            "holidays": list(self.holidays),
        }
        if self.name is not None:
            data["name"] = self.name
        return data

    @classmethod
    def from_json(cls, data: object) -> Calendar:
        """The inverse of :meth:`to_json`; ``ValueError`` on a malformed object."""
        if not isinstance(data, dict):
            raise ValueError(f"a calendar must be a JSON object, got {data!r:.80}")
        unknown = set(data) - {"timezone", "weekdays_off", "dates_off", "holidays", "name"}
        if unknown:
            raise ValueError(f"calendar has unknown fields {sorted(unknown)}")
        try:
            return cls(
                timezone=str(data.get("timezone", "UTC")),
                weekdays_off=_sequence(data.get("weekdays_off", ()), "weekdays_off"),
                dates_off=_sequence(data.get("dates_off", ()), "dates_off"),
                holidays=_sequence(data.get("holidays", ()), "holidays"),
                name=data.get("name"),
            )
        except TypeError as exc:
            raise ValueError(f"malformed calendar {data!r:.200}: {exc}") from None


def _sequence(value: object, what: str) -> tuple[Any, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(f"Calendar {what} must be a list, got {value!r:.80}")
    return tuple(value)


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: import flowsched stays light

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r} (use an IANA name such as 'Europe/Berlin')"
        ) from None


def _weekdays(values: object) -> tuple[int, ...]:
    found: set[int] = set()
    for value in _sequence(values, "weekdays_off"):
        found.add(_weekday(value))
    return tuple(sorted(found))


def _weekday(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 6:
        return value
    if isinstance(value, str):
        text = value.strip().upper()
        if text in WEEKDAYS:
            return WEEKDAYS.index(text)
        if text in _FULL_NAMES:
            return _FULL_NAMES.index(text)
    raise ValueError(
        f"unknown weekday {value!r} in Calendar weekdays_off (use MON TUE WED THU FRI SAT "
        "SUN, full names, or Python's numbers, Monday 0 to Sunday 6)"
    )


def _dates(values: object) -> tuple[date, ...]:
    found: set[date] = set()
    for value in _sequence(values, "dates_off"):
        if isinstance(value, datetime):
            raise ValueError(
                f"Calendar dates_off takes dates, not datetimes (got {value!r}): use "
                f"{value.date()!r}"
            )
        if isinstance(value, date):
            found.add(value)
            continue
        if isinstance(value, str):
            try:
                found.add(date.fromisoformat(value.strip()))
                continue
            except ValueError:
                pass
        raise ValueError(f"bad date {value!r} in Calendar dates_off (use a date or 'YYYY-MM-DD')")
    return tuple(sorted(found))


def _holiday_names(values: object) -> tuple[str, ...]:
    names: list[str] = []
    for value in _sequence(values, "holidays"):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"bad holiday calendar {value!r} in Calendar holidays")
        name = value.strip().upper()
        name = _FINANCIAL_ALIASES.get(name, name)
        _check_holidays(name)
        if name not in names:
            names.append(name)
    return tuple(names)


class MissingHolidays(ImportError, ValueError):
    """A calendar names holidays and the ``holidays`` package is not installed. An
    ``ImportError``, and a ``ValueError`` too, so that a stored calendar read on a node
    without it is a malformed document (named, set aside) rather than a crash."""


def _holidays_module() -> Any:
    try:
        import holidays
    except ImportError:
        raise MissingHolidays(
            "Calendar holidays need the holidays package: pip install 'flowsched[calendars]' "
            "(on every node that runs such a schedule)"
        ) from None
    return holidays


def _check_holidays(name: str) -> None:
    """``ValueError`` naming ``name`` unless the ``holidays`` package knows it."""
    _factory(name)


@lru_cache(maxsize=64)
def _factory(name: str) -> tuple[str, str, str | None]:
    """How to build the holidays of ``name``: ("financial", market, None) or ("country",
    code, subdivision); ``ValueError`` naming it if the package has no such calendar."""
    holidays = _holidays_module()
    markets = holidays.list_supported_financial()
    if name in markets:
        return ("financial", name, None)
    country, _, subdivision = name.partition("-")
    countries = holidays.list_supported_countries()
    if country not in countries:
        raise ValueError(
            f"unknown holiday calendar {name!r} in Calendar holidays: not a market of the "
            "holidays package (ECB, NYSE, ...) nor a country code (DE, US, ...) with an "
            "optional subdivision (DE-BY)"
        )
    if subdivision:
        known = {str(s).upper(): str(s) for s in countries[country]}
        if subdivision not in known:
            listed = ", ".join(list(known)[:40]) or "none"
            raise ValueError(
                f"unknown holiday calendar {name!r} in Calendar holidays: {country} has no "
                f"subdivision {subdivision!r} (it has {listed})"
            )
        return ("country", country, known[subdivision])
    return ("country", country, None)


_HOLIDAYS_LOCK = threading.Lock()


@lru_cache(maxsize=512)
def _holiday_dates(name: str, year: int) -> frozenset[date]:
    """The holidays of calendar ``name`` in ``year`` (built once, under a lock: the package's
    objects fill themselves in lazily and are not meant to be shared between threads)."""
    how, code, subdivision = _factory(name)
    holidays = _holidays_module()
    with _HOLIDAYS_LOCK:
        try:
            if how == "financial":
                found = holidays.financial_holidays(code, years=year)
            else:
                found = holidays.country_holidays(code, subdiv=subdivision, years=year)
            return frozenset(day for day in found if day.year == year)
        except Exception as exc:  # the package's own failure: never a crash of a tick
            raise ValueError(
                f"holiday calendar {name!r} cannot give the holidays of {year}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
