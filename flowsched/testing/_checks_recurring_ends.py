"""Checks of recurring items that end or skip days: ``max_runs`` and ``until`` end the item
(it is removed, not dead-lettered), a day the calendar closes has no tick (skipped, not
moved), local times across a daylight-saving change. Part of ``RECURRING_GUARANTEES``."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from flowsched.calendar import Calendar
from flowsched.recurrence import Recurrence
from flowsched.testing._trial import TIMER, Guarantee, Recorder, Trial

__all__ = ["ENDS_GUARANTEES"]

HOUR = timedelta(hours=1)
BERLIN = ZoneInfo("Europe/Berlin")
# Business days without the holidays package: weekends and Christmas Day off.
BUSINESS_DAYS = Calendar(
    timezone="Europe/Berlin", weekdays_off=("SAT", "SUN"), dates_off=(date(2026, 12, 25),)
)


def _max_runs_ends_the_item(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    s.schedule_recurring("sweep", Recurrence.every(HOUR, max_runs=3))
    t.clock.advance(6 * HOUR)
    runs = [d.item.runs for d in rec.deliveries]
    assert runs == [0, 1, 2], f"with max_runs=3 the ticks saw runs {runs}"
    assert not s.exists("sweep"), "a recurring item that reached max_runs is still scheduled"
    assert s.dead_letters() == [], "a recurring item that reached max_runs was dead-lettered"


def _a_failed_tick_counts_towards_max_runs(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    rec.fail("sweep", times=1)
    s.schedule_recurring("sweep", Recurrence.every(HOUR, max_runs=2))
    t.clock.advance(5 * HOUR)
    assert len(rec.deliveries) == 2, f"{len(rec.deliveries)} ticks, expected 2 (one failed)"
    assert not s.exists("sweep"), "the item outlived its max_runs"


def _until_ends_the_item(t: Trial) -> None:
    s, rec = t.scheduler, t.recorder
    s.subscribe(TIMER, rec)
    start = t.clock.now()
    s.schedule_recurring("sweep", Recurrence.every(HOUR, until=start + 2 * HOUR + HOUR / 2))
    t.clock.advance(6 * HOUR)
    slots = [d.item.due for d in rec.deliveries]
    assert slots == [start + HOUR, start + 2 * HOUR], f"ticks for {slots}"
    assert not s.exists("sweep"), "a recurring item past its until is still scheduled"
    assert s.dead_letters() == [], "a recurring item past its until was dead-lettered"


def _closed_days_are_skipped(t: Trial) -> None:
    clock = t.new_clock(datetime(2026, 12, 23, 12, tzinfo=UTC))  # a Wednesday
    s = t.build(clock)
    rec = Recorder(clock)
    s.subscribe(TIMER, rec)
    at_seven = Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar=BUSINESS_DAYS)
    s.schedule_recurring("settle", at_seven)
    clock.advance(timedelta(days=7))
    local = [d.item.due.astimezone(BERLIN) for d in rec.deliveries]
    days = [d.date().isoformat() for d in local]
    expected = ["2026-12-24", "2026-12-28", "2026-12-29", "2026-12-30"]
    assert days == expected, f"ticks on {days}, expected {expected} (25th and weekend off)"
    assert {(d.hour, d.minute) for d in local} == {(7, 0)}, f"local times {local}"


def _closed_days_across_dst(t: Trial) -> None:
    # Clocks go forward on Sunday 29 March 2026 in Berlin: Friday 07:00 is 06:00 UTC, and
    # Monday 07:00 is 05:00 UTC.
    clock = t.new_clock(datetime(2026, 3, 26, 12, tzinfo=UTC))  # a Thursday
    s = t.build(clock)
    rec = Recorder(clock)
    s.subscribe(TIMER, rec)
    s.schedule_recurring("settle", Recurrence.cron("0 7 * * *", "UTC", calendar=BUSINESS_DAYS))
    s.schedule_recurring(
        "local", Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar=BUSINESS_DAYS)
    )
    clock.advance(timedelta(days=5))
    local = sorted(d.item.due for d in rec.deliveries if d.item.id == "local")
    assert [d.hour for d in local] == [6, 5, 5], f"UTC hours of 07:00 Berlin: {local}"
    utc = [d.item.due.date().isoformat() for d in rec.deliveries if d.item.id == "settle"]
    assert utc == ["2026-03-27", "2026-03-30", "2026-03-31"], f"UTC ticks on {utc}"


ENDS_GUARANTEES = (
    Guarantee(
        "a recurring item ends after max_runs ticks: removed, not dead-lettered",
        _max_runs_ends_the_item,
    ),
    Guarantee("a failed tick counts towards max_runs", _a_failed_tick_counts_towards_max_runs),
    Guarantee("a recurring item has no tick after until, then is removed", _until_ends_the_item),
    Guarantee(
        "a day the calendar closes has no tick: skipped, not moved", _closed_days_are_skipped
    ),
    Guarantee("a calendar's days hold across a daylight-saving change", _closed_days_across_dst),
)
