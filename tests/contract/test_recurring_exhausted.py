"""A recurring item with no slot left (none before the year 10000) is set aside, once, with the
reason - on every adapter, by the delivery core's one rule: never redelivered, for that could
only run an applied slot again or fail the same way for ever. Every adapter (in memory,
MongoDB, PostgreSQL) keeps it among its dead letters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flowsched import ManualClock, Recurrence, ScheduleItem, ScheduleKind, SchedulerPort

START = datetime(2026, 1, 1, tzinfo=UTC)
SEVEN_MILLENNIA = timedelta(days=7000 * 365)
"""From 2026 one slot falls before the year 10000 (in 9021), the next would be after it."""


def set_aside(scheduler: SchedulerPort, item_id: str) -> str:
    """The reason ``item_id`` was set aside: its dead letter, on every adapter."""
    (letter,) = [d for d in scheduler.dead_letters() if d.item.id == item_id]
    return letter.error


def test_a_recurring_item_whose_last_slot_ran_is_set_aside_not_redelivered(
    make_scheduler: Any, adapter_name: str
) -> None:
    clock = ManualClock(START)
    scheduler = make_scheduler(clock)
    ran: list[datetime] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: ran.append(item.due))
    scheduler.schedule_recurring("last-tick", Recurrence.every(SEVEN_MILLENNIA))

    clock.advance(SEVEN_MILLENNIA)  # its one slot runs; there is no next one
    clock.advance(timedelta(days=365))  # a redelivery would be due within seconds

    assert ran == [START + SEVEN_MILLENNIA]
    assert not scheduler.exists("last-tick")
    assert "before the year 10000" in set_aside(scheduler, "last-tick")


def test_a_recurring_item_with_no_slot_at_all_is_set_aside_without_running(
    make_scheduler: Any, adapter_name: str
) -> None:
    clock = ManualClock(START)
    scheduler = make_scheduler(clock)
    ran: list[ScheduleItem] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: ran.append(item))
    # Built by hand (schedule_recurring refuses a recurrence without a first slot): its first
    # slot would be in the year 10026.
    endless = Recurrence.every(timedelta(days=8000 * 365), start=START)
    scheduler.schedule(ScheduleItem("no-slot", ScheduleKind.TIMER, START, recurrence=endless))

    clock.advance(timedelta(hours=1))

    assert ran == []
    assert not scheduler.exists("no-slot")
    assert "before the year 10000" in set_aside(scheduler, "no-slot")
