"""``Calendar``: which days it closes (weekdays, dates, the ``holidays`` package's calendars),
in its own time zone; names checked at construction; frozen, hashable, stored as JSON."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowsched import Calendar

BERLIN = "Europe/Berlin"


def test_weekdays_by_name_in_any_case_full_names_or_python_numbers() -> None:
    assert Calendar(weekdays_off=("sat", "SUN")).weekdays_off == (5, 6)
    assert Calendar(weekdays_off=["Saturday", 6]).weekdays_off == (5, 6)
    assert Calendar(weekdays_off=[0]).is_open(date(2026, 12, 7)) is False  # a Monday


def test_target2_closes_christmas_good_friday_easter_monday_and_may_day() -> None:
    ecb = Calendar(holidays=["ECB"])
    closed = [date(2026, 12, 25), date(2026, 12, 26), date(2026, 4, 3), date(2026, 4, 6)]
    assert [ecb.is_open(day) for day in closed] == [False] * 4
    assert ecb.is_open(date(2026, 5, 1)) is False
    assert ecb.is_open(date(2026, 12, 24)) is True  # open for TARGET2
    assert Calendar(holidays=["target2"]) == ecb


def test_country_subdivision_and_market_calendars() -> None:
    assert Calendar(holidays=["DE-BY"]).is_open(date(2026, 1, 6)) is False  # Epiphany
    assert Calendar(holidays=["DE"]).is_open(date(2026, 1, 6)) is True  # not nationwide
    assert Calendar(holidays=["NYSE"]).is_open(date(2026, 7, 3)) is False  # July 4th observed


def test_dates_off_as_dates_or_iso_strings() -> None:
    calendar = Calendar(dates_off=[date(2026, 12, 24), "2026-12-31"])
    assert calendar.dates_off == (date(2026, 12, 24), date(2026, 12, 31))
    assert calendar.is_open(date(2026, 12, 31)) is False


def test_the_day_of_an_instant_is_judged_in_the_calendars_own_zone() -> None:
    # 23:30 UTC on Friday 2026-12-25 is already Saturday 00:30 in Berlin.
    late_friday = datetime(2026, 12, 25, 23, 30, tzinfo=UTC)
    assert Calendar(timezone=BERLIN, weekdays_off=["SAT"]).allows(late_friday) is False
    assert Calendar(timezone="UTC", weekdays_off=["SAT"]).allows(late_friday) is True


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"timezone": "Mars/Olympus"}, "'Mars/Olympus'"),
        ({"weekdays_off": ["FUNDAY"]}, "'FUNDAY'"),
        ({"weekdays_off": [7]}, "7"),
        ({"weekdays_off": [True]}, "True"),
        ({"dates_off": ["2026-13-01"]}, "'2026-13-01'"),
        ({"dates_off": [datetime(2026, 1, 1, tzinfo=UTC)]}, "datetime"),
        ({"holidays": ["XX"]}, "'XX'"),
        ({"holidays": ["DE-ZZ"]}, "'ZZ'"),
        ({"holidays": "ECB"}, "'ECB'"),
        ({"weekdays_off": range(7)}, "every day"),
    ],
)
def test_a_bad_value_is_a_value_error_naming_it(arguments: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        Calendar(**arguments)  # type: ignore[arg-type]


def test_frozen_hashable_and_equal_by_what_it_closes() -> None:
    one = Calendar(timezone=BERLIN, weekdays_off=["SUN", "SAT"], holidays=["ECB"], name="t2")
    two = Calendar(timezone=BERLIN, weekdays_off=[5, 6], holidays=["ecb"])
    assert one == two and hash(one) == hash(two)
    assert len({one, two}) == 1
    with pytest.raises(AttributeError):
        one.timezone = "UTC"  # type: ignore[misc]


def test_json_round_trip_through_text() -> None:
    calendar = Calendar(
        timezone=BERLIN,
        weekdays_off=["SAT"],
        dates_off=["2026-12-24"],
        holidays=["ECB", "DE-BY"],
        name="target2",
    )
    back = Calendar.from_json(json.loads(json.dumps(calendar.to_json())))
    assert back == calendar and back.name == "target2"


@pytest.mark.parametrize(
    "data", [[], {"timezone": 3}, {"weekdays_off": "SAT"}, {"colour": "red"}, {"holidays": [1]}]
)
def test_a_malformed_stored_calendar_is_a_value_error(data: object) -> None:
    with pytest.raises(ValueError):
        Calendar.from_json(data)


@given(
    st.sets(st.integers(0, 6), max_size=6),
    st.sets(st.dates(date(2020, 1, 1), date(2030, 12, 31)), max_size=5),
    st.dates(date(2020, 1, 1), date(2030, 12, 31)),
)
def test_a_day_is_open_unless_its_weekday_or_date_is_off(
    weekdays: set[int], dates: set[date], day: date
) -> None:
    calendar = Calendar(weekdays_off=weekdays, dates_off=dates)
    assert calendar.is_open(day) == (day.weekday() not in weekdays and day not in dates)
    assert Calendar.from_json(calendar.to_json()) == calendar


def test_without_the_holidays_package_a_holiday_calendar_is_named_as_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from flowsched import calendar

    calendar._factory.cache_clear()
    monkeypatch.setitem(sys.modules, "holidays", None)
    try:
        with pytest.raises(ImportError, match=r"flowsched\[calendars\]"):
            Calendar(holidays=["ECB"])
        # Read from a stored item, it is a ValueError: the document is malformed here.
        with pytest.raises(ValueError, match="holidays package"):
            Calendar.from_json({"timezone": "UTC", "holidays": ["ECB"]})
        assert Calendar(weekdays_off=["SAT"]).is_open(date(2026, 12, 26)) is False
    finally:
        calendar._factory.cache_clear()
