"""Recurring items with ``until``, ``max_runs`` and calendars on every adapter (in memory,
MongoDB through mongomock): closed days have no tick, an ended recurrence removes its item
(no dead letter), and on MongoDB the runs are counted once across restarts and nodes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from flowsched import Calendar, ManualClock, Recurrence, ScheduleItem, SchedulerPort

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
ECB_DAYS = Calendar(timezone="Europe/Berlin", weekdays_off=["SAT", "SUN"], holidays=["ECB"])

Make = Callable[..., SchedulerPort]
ON_MONGODB = ["mongomock", pytest.param("mongo-wire", marks=pytest.mark.wire)]


def recorder(ticks: list[ScheduleItem]) -> Callable[[ScheduleItem, int], None]:
    return lambda item, attempt: ticks.append(item)


def test_ecb_business_days_at_seven_in_berlin_skip_christmas_and_weekends(
    make: Make, clock: ManualClock
) -> None:
    scheduler = make()
    ticks: list[ScheduleItem] = []
    scheduler.register("settle", recorder(ticks))
    at_seven = Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar=ECB_DAYS)
    scheduler.schedule_recurring("settlement", at_seven, handler="settle")
    for _ in range(14):
        clock.advance(DAY)
    local = [t.due.astimezone(BERLIN) for t in ticks]
    assert [d.date() for d in local] == [
        date(2026, 12, 24),
        date(2026, 12, 28),  # Friday 25 (TARGET2 holiday), Saturday and Sunday skipped
        date(2026, 12, 29),
        date(2026, 12, 30),
        date(2026, 12, 31),
        date(2027, 1, 4),  # New Year's Day (TARGET2) and the weekend skipped
        date(2027, 1, 5),
        date(2027, 1, 6),
    ]
    assert {(d.hour, d.minute) for d in local} == {(7, 0)}
    assert [t.runs for t in ticks] == list(range(8))  # the runs before each one


def test_max_runs_then_the_item_is_removed_not_dead_lettered(
    make: Make, clock: ManualClock
) -> None:
    scheduler = make()
    ticks: list[ScheduleItem] = []
    scheduler.register("sweep", recorder(ticks))
    scheduler.schedule_recurring("sweep", Recurrence.every(HOUR, max_runs=3), handler="sweep")
    for _ in range(6):
        clock.advance(HOUR)
    assert len(ticks) == 3
    assert not scheduler.exists("sweep")
    assert scheduler.dead_letters() == []  # type: ignore[attr-defined]


def test_no_tick_after_until_and_then_the_item_is_removed(make: Make, clock: ManualClock) -> None:
    scheduler = make()
    ticks: list[ScheduleItem] = []
    scheduler.register("sweep", recorder(ticks))
    until = clock.now() + 2 * HOUR + HOUR / 2
    scheduler.schedule_recurring("sweep", Recurrence.every(HOUR, until=until), handler="sweep")
    clock.advance(10 * HOUR)
    clock.advance(HOUR)
    assert [t.due for t in ticks] == [until - 3 * HOUR / 2, until - HOUR / 2]
    assert not scheduler.exists("sweep")
    assert scheduler.dead_letters() == []  # type: ignore[attr-defined]


def test_a_failed_tick_counts_as_a_run_unless_retry_failed(make: Make, clock: ManualClock) -> None:
    scheduler = make()
    calls: list[str] = []

    def flaky(item: ScheduleItem, attempt: int) -> None:
        calls.append(item.id)
        if len(calls) % 2:
            raise RuntimeError("first try fails")

    scheduler.register("flaky", flaky)
    scheduler.schedule_recurring("counted", Recurrence.every(HOUR, max_runs=2), handler="flaky")
    for _ in range(4):
        clock.advance(HOUR)
    assert calls == ["counted", "counted"]  # failed, then ran: two runs, ended
    assert not scheduler.exists("counted")

    calls.clear()
    retried = Recurrence.every(HOUR, max_runs=2, retry_failed=True)
    scheduler.schedule_recurring("retried", retried, handler="flaky")
    for _ in range(8):
        clock.advance(HOUR)
    assert calls == ["retried"] * 4  # each run's first try fails and is redelivered
    assert not scheduler.exists("retried")


def test_a_calendar_named_in_the_config_is_used_by_name(clock: ManualClock) -> None:
    from flowsched import InMemoryScheduler, SchedulingConfig

    config = SchedulingConfig.from_string(
        "ipf-scheduler.calendars.target2 { timezone = Europe/Berlin, weekdays-off = [SAT, SUN],"
        " holidays = [ECB] }"
    )
    scheduler = InMemoryScheduler.from_config(config, clock=clock)
    named = Recurrence.cron("0 7 * * *", "Europe/Berlin", calendar="target2")
    stored = scheduler.schedule_recurring("settlement", named, handler="settle")
    assert stored.recurrence is not None and stored.recurrence.calendar == ECB_DAYS
    assert stored.due.astimezone(BERLIN) == datetime(2026, 12, 24, 7, tzinfo=BERLIN)
    with pytest.raises(ValueError, match=r"'nyse'.*known calendars: target2"):
        scheduler.schedule_recurring("x", Recurrence.every(HOUR, calendar="nyse"))
    with pytest.raises(ValueError, match="'target2'"):
        InMemoryScheduler(clock=clock).schedule_recurring("x", named)


def test_a_recurrence_without_a_slot_cannot_be_scheduled(make: Make, clock: ManualClock) -> None:
    scheduler = make()
    too_soon = Recurrence.every(HOUR, until=clock.now() + HOUR / 2)
    with pytest.raises(ValueError, match=r"'short'.*until"):
        scheduler.schedule_recurring("short", too_soon)
    assert not scheduler.exists("short")


# -- MongoDB: the runs so far live in the document ---------------------------------------------


@pytest.mark.parametrize("adapter", ON_MONGODB, indirect=True)
def test_max_runs_holds_across_a_restart(make: Make, clock: ManualClock) -> None:
    ticks: list[ScheduleItem] = []
    first = make("before")
    first.register("sweep", recorder(ticks))
    first.schedule_recurring("sweep", Recurrence.every(HOUR, max_runs=3), handler="sweep")
    clock.advance(HOUR)
    clock.advance(HOUR)
    first.close()

    again = make("after")  # a new process on the same collection
    again.register("sweep", recorder(ticks))
    stored = again.get("sweep")  # type: ignore[attr-defined]
    assert stored is not None and stored.runs == 2
    for _ in range(5):
        clock.advance(HOUR)
    assert len(ticks) == 3
    assert not again.exists("sweep")


@pytest.mark.parametrize("adapter", ON_MONGODB, indirect=True)
def test_two_nodes_run_max_runs_ticks_between_them(make: Make, clock: ManualClock) -> None:
    ticks: list[tuple[str, ScheduleItem]] = []
    one, two = make("one"), make("two")
    for name, node in (("one", one), ("two", two)):
        node.register("sweep", lambda item, attempt, name=name: ticks.append((name, item)))
    one.schedule_recurring("sweep", Recurrence.every(HOUR, max_runs=4), handler="sweep")
    for step in range(8):
        clock.advance(HOUR)
        (two if step % 2 else one).run_due()  # type: ignore[attr-defined]
    assert len(ticks) == 4
    assert [item.runs for _, item in ticks] == [0, 1, 2, 3]
    assert len({item.due for _, item in ticks}) == 4  # each slot applied once
    assert not one.exists("sweep")


@pytest.mark.parametrize("adapter", ON_MONGODB, indirect=True)
def test_a_run_is_counted_when_its_slot_is_taken_even_if_its_node_dies(
    make: Make, clock: ManualClock
) -> None:
    lease = timedelta(seconds=30)
    # Not started: each runs only when told (run_due), as in two separate processes.
    slow, other = make("slow", start=False, lease=lease), make("other", start=False, lease=lease)
    ticks: list[tuple[str, datetime]] = []

    def stalls(item: ScheduleItem, attempt: int) -> None:
        ticks.append(("slow", item.due))
        # Its lease runs out mid-tick (as if its node died): the other node takes over.
        clock.advance(lease + timedelta(seconds=1))
        other.run_due()  # type: ignore[attr-defined]

    slow.register("sweep", stalls)
    other.register("sweep", lambda item, attempt: ticks.append(("other", item.due)))
    stored = slow.schedule_recurring("sweep", Recurrence.every(HOUR, max_runs=2), handler="sweep")
    clock.advance(HOUR)
    slow.run_due()  # type: ignore[attr-defined]
    found = other.get("sweep")  # type: ignore[attr-defined]
    assert found is not None and found.runs == 1  # counted by the write that took the slot
    clock.advance(2 * HOUR)
    other.run_due()  # type: ignore[attr-defined]
    clock.advance(2 * HOUR)
    other.run_due()  # type: ignore[attr-defined]
    assert [who for who, _ in ticks] == ["slow", "other"]
    assert ticks[0][1] == stored.due
    assert not other.exists("sweep")


@pytest.mark.parametrize("adapter", ["mongomock"], indirect=True)
def test_a_document_written_before_the_ends_existed_reads_and_runs(
    make: Make, clock: ManualClock, collection: Any
) -> None:
    scheduler = make()
    ticks: list[ScheduleItem] = []
    scheduler.register("sweep", recorder(ticks))
    scheduler.schedule_recurring("old", Recurrence.every(HOUR), handler="sweep")
    collection.update_one({"_id": "old"}, {"$unset": {"runs": ""}})
    document = collection.find_one({"_id": "old"})
    assert "runs" not in document and set(document["recurrence"]) == {
        "retry_failed",
        "every_seconds",
        "start",
    }
    clock.advance(HOUR)
    clock.advance(HOUR)
    assert len(ticks) == 2
    assert collection.find_one({"_id": "old"})["runs"] == 2


@pytest.mark.parametrize("adapter", ["mongomock"], indirect=True)
def test_the_document_keeps_the_ends_and_the_calendar_as_json(
    make: Make, clock: ManualClock, collection: Any
) -> None:
    scheduler = make()
    until = clock.now() + 30 * DAY
    recurrence = Recurrence.cron(
        "0 7 * * *", "Europe/Berlin", until=until, max_runs=5, calendar=ECB_DAYS
    )
    scheduler.schedule_recurring("settlement", recurrence, handler="settle")
    stored = collection.find_one({"_id": "settlement"})["recurrence"]
    assert stored["until"] == until.isoformat()
    assert stored["max_runs"] == 5
    assert stored["calendar"] == {
        "timezone": "Europe/Berlin",
        "weekdays_off": ["SAT", "SUN"],
        "dates_off": [],
        "holidays": ["ECB"],
    }
    item = scheduler.get("settlement")  # type: ignore[attr-defined]
    assert item is not None and item.recurrence == recurrence.anchored(item.recurrence.start)
