"""Where the slots of a recurrence with ``until``, ``max_runs`` and a calendar fall (pure):
none after ``until``, none on a closed day (skipped, not moved), 07:00 local across DST."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowsched import Calendar, Recurrence

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = timedelta(hours=1)
ECB_DAYS = Calendar(timezone="Europe/Berlin", weekdays_off=["SAT", "SUN"], holidays=["ECB"])


def slots(recurrence: Recurrence, count: int) -> list[datetime]:
    found: list[datetime] = []
    after = recurrence.start
    assert after is not None
    while len(found) < count:
        slot = recurrence.following(after)
        if slot is None:
            return found
        found.append(slot)
        after = slot
    return found


def at_seven_on_ecb_days(start: datetime) -> Recurrence:
    return Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar=ECB_DAYS, start=start)


def test_christmas_and_the_weekend_after_it_are_skipped_not_moved() -> None:
    ticks = slots(at_seven_on_ecb_days(datetime(2026, 12, 23, 12, tzinfo=UTC)), 4)
    assert [t.astimezone(BERLIN).date() for t in ticks] == [
        date(2026, 12, 24),  # Thursday
        date(2026, 12, 28),  # Monday: Friday 25 (ECB), Saturday 26, Sunday 27 skipped
        date(2026, 12, 29),
        date(2026, 12, 30),
    ]
    assert {(t.astimezone(BERLIN).hour, t.astimezone(BERLIN).minute) for t in ticks} == {(7, 0)}


@pytest.mark.parametrize(
    ("start", "utc_hours"),
    [
        (datetime(2026, 3, 25, 12, tzinfo=UTC), [6, 6, 5, 5]),  # CET -> CEST on Sunday 29 March
        (datetime(2026, 10, 21, 12, tzinfo=UTC), [5, 5, 6, 6]),  # CEST -> CET on Sunday 25 Oct
    ],
)
def test_seven_local_holds_across_both_dst_changes(start: datetime, utc_hours: list[int]) -> None:
    ticks = slots(at_seven_on_ecb_days(start), 4)
    assert [t.astimezone(BERLIN).hour for t in ticks] == [7, 7, 7, 7]
    assert [t.hour for t in ticks] == utc_hours
    assert [t.astimezone(BERLIN).weekday() for t in ticks] == [3, 4, 0, 1]  # Thu Fri Mon Tue


def test_every_with_a_calendar_skips_the_slots_of_closed_days() -> None:
    start = datetime(2026, 12, 24, 22, tzinfo=UTC)  # Thursday 23:00 in Berlin
    every = Recurrence.every(timedelta(hours=6), calendar=ECB_DAYS, start=start)
    first = every.next_slot(start)
    # Slots fall at 05, 11, 17 and 23 local; Friday 05:00 .. Sunday 23:00 are all closed.
    assert first.astimezone(BERLIN) == datetime(2026, 12, 28, 5, tzinfo=BERLIN)
    assert first - start == timedelta(hours=6) * 13  # still on the every-6h grid


def test_after_a_gap_the_latest_open_slot_runs() -> None:
    start = datetime(2026, 12, 23, 12, tzinfo=UTC)
    every = Recurrence.every(HOUR, calendar=ECB_DAYS, start=start)
    now = datetime(2026, 12, 26, 10, 30, tzinfo=UTC)  # Saturday: down since Wednesday
    latest = every.slot_to_run(now, None)
    assert latest is not None
    assert latest.astimezone(BERLIN) == datetime(2026, 12, 24, 23, tzinfo=BERLIN)
    cron = at_seven_on_ecb_days(start)
    assert cron.slot_to_run(now, None) == datetime(2026, 12, 24, 6, tzinfo=UTC)


def test_no_slot_after_until() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    every = Recurrence.every(HOUR, start=start, until=start + 3 * HOUR)
    assert slots(every, 10) == [start + HOUR, start + 2 * HOUR, start + 3 * HOUR]
    assert every.following(start + 3 * HOUR) is None
    assert every.slot_to_run(start + 10 * HOUR, start + HOUR) == start + 3 * HOUR
    assert every.slot_to_run(start + 10 * HOUR, start + 3 * HOUR) is None
    with pytest.raises(ValueError, match="until"):
        every.next_slot(start + 3 * HOUR)


def test_max_runs_is_reached_by_that_many_runs() -> None:
    every = Recurrence.every(HOUR, max_runs=2)
    assert (every.ended(1), every.ended(2)) == (False, True)
    assert Recurrence.every(HOUR).ended(10**9) is False


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_runs": 0}, "max_runs"),
        ({"max_runs": True}, "max_runs"),
        ({"until": datetime(2026, 1, 1)}, "until"),  # naive
        ({"until": datetime(2025, 1, 1, tzinfo=UTC)}, "before its start"),
        ({"calendar": ""}, "calendar"),
    ],
)
def test_bad_ends_are_value_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Recurrence.every(HOUR, start=datetime(2026, 1, 1, tzinfo=UTC), **options)  # type: ignore[arg-type]


def test_a_calendar_name_must_be_resolved_before_slots_are_computed() -> None:
    named = Recurrence.every(HOUR, calendar="target2", start=datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="'target2'"):
        named.next_slot(datetime(2026, 1, 1, tzinfo=UTC))
    assert named.resolved({"target2": ECB_DAYS}).calendar == ECB_DAYS
    with pytest.raises(ValueError, match=r"'target2'.*known calendars: ecb, nyse"):
        named.resolved({"nyse": ECB_DAYS, "ecb": ECB_DAYS})


def test_json_round_trip_keeps_the_ends_and_old_objects_read_without_them() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    full = Recurrence.cron(
        "0 7 * * *",
        "Europe/Berlin",
        start=start,
        until=start + 30 * 24 * HOUR,
        max_runs=5,
        calendar=ECB_DAYS,
    )
    assert Recurrence.from_json(full.to_json()) == full
    old = {"retry_failed": False, "every_seconds": 3600.0, "start": start.isoformat()}
    back = Recurrence.from_json(old)
    assert (back.until, back.max_runs, back.calendar) == (None, None, None)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 48),  # interval, hours
    st.sets(st.integers(0, 6), max_size=6),
    st.integers(0, 24 * 60),  # now, hours after the start
)
def test_slot_to_run_is_the_latest_open_slot_due(
    hours: int, weekdays: set[int], later: int
) -> None:
    start = datetime(2026, 3, 20, 1, 30, tzinfo=UTC)
    calendar = Calendar(timezone="Europe/Berlin", weekdays_off=weekdays)
    every = Recurrence.every(timedelta(hours=hours), calendar=calendar, start=start)
    now = start + timedelta(hours=later)
    expected = None
    slot = start + timedelta(hours=hours)
    while slot <= now:  # the definition, slot by slot
        if calendar.allows(slot):
            expected = slot
        slot += timedelta(hours=hours)
    try:
        found = every.slot_to_run(now, None)
    except ValueError:  # no slot ever falls on an open day (e.g. every 28 h, Thursdays only)
        assert expected is None
        return
    assert found == expected
    if expected is not None:
        assert calendar.allows(expected)


def test_the_tools_show_the_ends_and_the_calendar() -> None:
    from flowsched.cli.timers_render import recurrence_text

    start = datetime(2026, 1, 1, tzinfo=UTC)
    named = Calendar(timezone="Europe/Berlin", weekdays_off=["SAT", "SUN"], name="target2")
    cron = Recurrence.cron(
        "0 7 * * *",
        "Europe/Berlin",
        start=start,
        until=start + 10 * HOUR,
        max_runs=5,
        calendar=named,
    )
    assert recurrence_text(cron.to_json()) == (
        "cron 0 7 * * * Europe/Berlin, until 2026-01-01T10:00:00+00:00, at most 5 runs, "
        "calendar target2"
    )
    assert recurrence_text(Recurrence.every(HOUR, start=start).to_json()) == "every 1h"


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["0 7 * * *", "30 1 * * *", "0 */5 * * *", "15 2 * * 1-5", "0 0 1 * *"]),
    st.sampled_from(["Europe/Berlin", "UTC", "America/New_York"]),
    st.sets(st.integers(0, 6), max_size=5),
    st.sets(st.dates(date(2026, 3, 1), date(2026, 4, 30)), max_size=8),
    st.datetimes(datetime(2026, 3, 1), datetime(2026, 3, 31)),
)
def test_a_calendar_drops_exactly_the_slots_of_closed_days(
    expr: str, zone: str, weekdays: set[int], dates: set[date], begin: datetime
) -> None:
    start = begin.replace(tzinfo=UTC, microsecond=0)
    calendar = Calendar(timezone="Europe/Berlin", weekdays_off=weekdays, dates_off=dates)
    plain = Recurrence.cron(expr, zone, start=start)
    raw, slot = [], start
    while len(raw) < 400:  # the slots without a calendar, filtered by hand
        slot = plain.next_slot(slot)
        raw.append(slot)
    expected = [s for s in raw if calendar.allows(s)][:5]
    found = slots(Recurrence.cron(expr, zone, start=start, calendar=calendar), len(expected))
    assert found == expected
