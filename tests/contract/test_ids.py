"""Every adapter accepts and refuses the same ids: at most 1024 UTF-8 bytes, valid Unicode
(no lone surrogate), no NUL. An id no item can have is simply not there (cancel/exists)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched import ScheduleItem, ScheduleKind
from flowsched.port import MAX_ID_BYTES

BAD_IDS = {
    "17 MB": "x" * (17 * 1024 * 1024),
    "1025 bytes": "x" * (MAX_ID_BYTES + 1),
    "513 two-byte characters": "é" * 513,
    "lone surrogate": "timer-\ud800",
    "NUL": "timer\x00one",
    "empty": "",
}
GOOD_IDS = {
    "1024 bytes": "x" * MAX_ID_BYTES,
    "512 two-byte characters": "é" * 512,
    "emoji": "timer-\U0001f600",
    "dots and dollars": "$a.b.c$",
}


@pytest.mark.parametrize("name", sorted(BAD_IDS))
def test_a_bad_id_is_a_value_error_on_every_adapter(make_scheduler, clock, name: str) -> None:
    scheduler = make_scheduler(clock)
    with pytest.raises(ValueError, match="ScheduleItem id"):
        scheduler.schedule(ScheduleItem(BAD_IDS[name], ScheduleKind.TIMER, clock.now()))
    assert scheduler.cancel(BAD_IDS[name]) is False
    assert scheduler.exists(BAD_IDS[name]) is False
    assert scheduler.cancel_flow(BAD_IDS[name]) == 0


@pytest.mark.parametrize("name", sorted(GOOD_IDS))
def test_a_good_id_round_trips_on_every_adapter(make_scheduler, clock, name: str) -> None:
    scheduler = make_scheduler(clock)
    seen: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: seen.append(item.id))
    item_id = GOOD_IDS[name]
    scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, clock.now(), flow_id=item_id))
    assert scheduler.exists(item_id)
    clock.advance(timedelta(seconds=1))
    assert seen == [item_id]
    assert not scheduler.exists(item_id)


@pytest.mark.parametrize("other", [{"a": 1}, ["timer"], 7, None, b"timer"], ids=repr)
def test_an_id_of_another_type_is_simply_not_there_on_every_adapter(
    make_scheduler, clock, other: object
) -> None:
    """Ids are strings, so no item has a dict, list, int or bytes id: ``exists`` and ``get``
    say so, ``cancel`` and ``cancel_flow`` remove nothing, on a scheduler holding items (an
    empty dict answers ``pop`` of an unhashable key without hashing it, hiding the case)."""
    scheduler = make_scheduler(clock)
    scheduler.schedule(ScheduleItem("timer", ScheduleKind.TIMER, clock.now(), flow_id="timer"))
    assert scheduler.exists(other) is False  # type: ignore[arg-type]
    assert scheduler.get(other) is None  # type: ignore[arg-type]
    assert scheduler.cancel(other) is False  # type: ignore[arg-type]
    assert scheduler.cancel_flow(other) == 0  # type: ignore[arg-type]
    assert scheduler.exists("timer")


@pytest.mark.parametrize("recurrence", [3600, "1h", None, timedelta(hours=1)], ids=repr)
def test_schedule_recurring_with_no_recurrence_is_a_type_error_naming_it(
    make_scheduler, clock, recurrence: object
) -> None:
    scheduler = make_scheduler(clock)
    with pytest.raises(TypeError, match=r"schedule_recurring\('r'\): recurrence must be a"):
        scheduler.schedule_recurring("r", recurrence)  # type: ignore[arg-type]
    assert not scheduler.exists("r")
