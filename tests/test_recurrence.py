"""Where the slots of recurring schedules fall (pure; adapters are tested elsewhere)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched import ConfigError
from flowsched.recurrence import Recurrence

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_every_counts_slots_from_the_start() -> None:
    every = Recurrence.every(HOUR, start=T0)
    assert every.next_slot(T0) == T0 + HOUR
    assert every.next_slot(T0 + HOUR) == T0 + 2 * HOUR
    assert every.next_slot(T0 + HOUR - timedelta(microseconds=1)) == T0 + HOUR


def test_nothing_is_due_before_the_first_slot() -> None:
    assert Recurrence.every(HOUR, start=T0).slot_to_run(T0 + HOUR / 2, None) is None


def test_after_a_gap_only_the_latest_slot_runs() -> None:
    every = Recurrence.every(HOUR, start=T0)
    assert every.slot_to_run(T0 + 3 * HOUR + HOUR / 2, None) == T0 + 3 * HOUR
    assert every.slot_to_run(T0 + 5 * HOUR, T0 + 2 * HOUR) == T0 + 5 * HOUR


def test_a_slot_at_or_before_the_applied_one_is_never_run_again() -> None:
    every = Recurrence.every(HOUR, start=T0)
    assert every.slot_to_run(T0 + 3 * HOUR, T0 + 3 * HOUR) is None
    assert every.slot_to_run(T0 + 3 * HOUR, T0 + 4 * HOUR) is None


def _local_ticks(expr: str, zone: str, start: datetime, days: int) -> list[datetime]:
    cron = Recurrence.cron(expr, zone, start=start)
    slots, slot = [], start
    while True:
        slot = cron.next_slot(slot)
        if slot > start + timedelta(days=days):
            return slots
        slots.append(slot)


def test_cron_in_london_ticks_at_local_two_across_both_dst_changes() -> None:
    from zoneinfo import ZoneInfo

    london = ZoneInfo("Europe/London")
    for start in (datetime(2026, 3, 26, tzinfo=UTC), datetime(2026, 10, 22, tzinfo=UTC)):
        slots = _local_ticks("0 2 * * *", "Europe/London", start, days=6)
        assert len(slots) == 6
        assert {(s.astimezone(london).hour, s.astimezone(london).minute) for s in slots} == {(2, 0)}
        assert len({s.astimezone(london).date() for s in slots}) == 6


def test_a_cron_time_that_occurs_twice_runs_once() -> None:
    # 01:30 happens twice in London on 2026-10-25 (clocks go back at 02:00 BST).
    slots = _local_ticks("30 1 * * *", "Europe/London", datetime(2026, 10, 24, tzinfo=UTC), 3)
    assert [s.isoformat() for s in slots] == [
        "2026-10-24T00:30:00+00:00",
        "2026-10-25T00:30:00+00:00",
        "2026-10-26T01:30:00+00:00",
    ]


def test_a_cron_time_that_does_not_exist_runs_an_hour_later_local() -> None:
    # 01:30 does not exist in London on 2026-03-29 (01:00 GMT jumps to 02:00 BST).
    slots = _local_ticks("30 1 * * *", "Europe/London", datetime(2026, 3, 28, tzinfo=UTC), 2)
    assert [s.isoformat() for s in slots] == [
        "2026-03-28T01:30:00+00:00",
        "2026-03-29T01:30:00+00:00",
    ]


def test_json_round_trip() -> None:
    for recurrence in (
        Recurrence.every(HOUR, start=T0, retry_failed=True),
        Recurrence.cron("0 2 * * *", "Europe/London", start=T0),
    ):
        assert Recurrence.from_json(recurrence.to_json()) == recurrence


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Recurrence.every(timedelta(0)), "must be positive"),
        (lambda: Recurrence.cron("61 * * * *"), "bad cron expression '61 \\* \\* \\* \\*'"),
        (lambda: Recurrence.cron("0 2 * * *", "Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
        (lambda: Recurrence(), "exactly one of"),
    ],
)
def test_bad_recurrences_name_the_value(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("seconds", [1e30, float("inf"), "1e400", 10**400])
def test_a_stored_interval_too_long_for_a_timedelta_is_a_value_error(seconds: object) -> None:
    with pytest.raises(ValueError, match="malformed recurrence"):
        Recurrence.from_json({"every_seconds": seconds})


def test_a_recurrence_with_no_slot_before_the_year_10000_is_a_value_error() -> None:
    from flowsched import InMemoryScheduler, ManualClock

    start = datetime(2026, 1, 1, tzinfo=UTC)
    every_9000_years = Recurrence.every(timedelta(days=365 * 9000))
    with pytest.raises(ValueError, match="no slot after 2026-01-01T00:00:00\\+00:00 before the"):
        every_9000_years.anchored(start).next_slot(start)
    with pytest.raises(ValueError, match="before the year 10000"):
        InMemoryScheduler(clock=ManualClock(start)).schedule_recurring("r", every_9000_years)


def test_a_recurrence_without_start_cannot_compute_slots() -> None:
    with pytest.raises(ValueError, match="no start"):
        Recurrence.every(HOUR).next_slot(T0)
    assert Recurrence.every(HOUR).anchored(T0).next_slot(T0) == T0 + HOUR


@pytest.mark.parametrize(
    ("text", "interval"),
    [("1h", timedelta(hours=1)), ("90 s", timedelta(seconds=90)), ("1500", timedelta(seconds=1.5))],
)
def test_every_takes_a_hocon_duration(text: str, interval: timedelta) -> None:
    assert Recurrence.every(text).interval == interval


def test_every_with_a_bad_duration_names_it() -> None:
    with pytest.raises(ConfigError, match=r'Recurrence\.every interval = "soon"'):
        Recurrence.every("soon")
    with pytest.raises(TypeError, match="timedelta or a duration string"):
        Recurrence.every(3600)  # type: ignore[arg-type]
