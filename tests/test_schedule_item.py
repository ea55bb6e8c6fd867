"""ScheduleItem as a value: checked when built, immutable, its payload kept encoded."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta, timezone

import pytest

from flowsched import InMemoryScheduler, ManualClock, Recurrence, ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_the_payload_read_back_is_a_new_dict_each_time() -> None:
    given = {"order": "o-1", "lines": [1, 2]}
    item = ScheduleItem("t", TIMER, T0, payload=given)
    given["order"] = "changed"
    read = item.payload
    assert read == {"order": "o-1", "lines": [1, 2]}
    assert read is not None
    read["lines"].append(3)
    assert item.payload == {"order": "o-1", "lines": [1, 2]}


def test_items_compare_by_value_whatever_the_payload_key_order() -> None:
    a = ScheduleItem("t", TIMER, T0, "f-1", {"a": 1, "b": 2})
    b = ScheduleItem("t", TIMER, T0, "f-1", {"b": 2, "a": 1})
    assert a == b
    assert a != ScheduleItem("t", TIMER, T0, "f-1", {"a": 1, "b": 3})
    assert a != ScheduleItem("t", TIMER, T0 + timedelta(seconds=1), "f-1", {"a": 1, "b": 2})


def test_an_item_cannot_be_changed() -> None:
    item = ScheduleItem("t", TIMER, T0)
    with pytest.raises(FrozenInstanceError):
        item.due = T0 + timedelta(hours=1)  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del item.id  # type: ignore[misc]


def test_a_built_item_is_a_plain_schedule_item_and_cannot_be_subclassed() -> None:
    # The constructor fills the fields in under another class and turns the object back.
    item = ScheduleItem("t", TIMER, T0, "f-1", {"a": 1}, 3, handler="h")
    assert type(item) is ScheduleItem
    assert (item.id, item.flow_id, item.generation, item.handler) == ("t", "f-1", 3, "h")
    assert type(item.with_generation(4)) is ScheduleItem
    assert type(item.moved(T0 + timedelta(seconds=1))) is ScheduleItem
    assert type(pickle.loads(pickle.dumps(item))) is ScheduleItem
    with pytest.raises(TypeError, match="cannot be subclassed"):

        class Mine(ScheduleItem):  # type: ignore[misc]
            pass


def test_a_kind_given_by_name_and_a_due_in_another_zone_are_normalised() -> None:
    item = ScheduleItem("t", "TIMER", T0.astimezone(timezone(timedelta(hours=2))))  # type: ignore[arg-type]
    assert item.kind is TIMER
    assert item.due == T0 and item.due.tzinfo is UTC


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("", TIMER, T0), ValueError, "non-empty string"),
        ((7, TIMER, T0), ValueError, "non-empty string"),
        (("t", "LATER", T0), ValueError, "unknown kind 'LATER'"),
        (("t", TIMER, "2026-01-05"), TypeError, "due must be a datetime"),
        (("t", TIMER, datetime(2026, 1, 5)), ValueError, "timezone-aware"),
        (("t", TIMER, T0, 5), ValueError, "flow_id must be a non-empty string"),
        (("t", TIMER, T0, None, ["x"]), ValueError, "payload must be a JSON object"),
        (("t", TIMER, T0, None, None, -1), ValueError, "generation must be a whole number"),
        (("t", TIMER, T0, None, None, True), ValueError, "generation must be a whole number"),
    ],
)
def test_a_bad_argument_is_refused_naming_it(
    args: tuple[object, ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ScheduleItem(*args)  # type: ignore[arg-type]


def test_a_recurring_item_keeps_its_recurrence_and_last_slot_through_a_move() -> None:
    every = Recurrence.every(timedelta(hours=1), start=T0)
    item = ScheduleItem("r", TIMER, T0 + timedelta(hours=1), payload={"k": 1}, recurrence=every)
    assert (item.recurrence, item.previous) == (every, None)
    moved = item.moved(T0 + timedelta(hours=2), T0 + timedelta(hours=1))
    assert (moved.recurrence, moved.previous) == (every, T0 + timedelta(hours=1))
    assert moved.payload == {"k": 1} and moved.generation == item.generation
    one_shot = ScheduleItem("o", TIMER, T0).moved(T0 + timedelta(hours=1), T0)
    assert (one_shot.recurrence, one_shot.previous) == (None, None)


def test_an_item_survives_pickling() -> None:
    every = Recurrence.every(timedelta(hours=1), start=T0)
    item = ScheduleItem("r", TIMER, T0, "f", {"k": 1}, 7, every, T0 - timedelta(hours=1))
    copy = pickle.loads(pickle.dumps(item))
    assert copy == item
    assert (copy.generation, copy.previous, copy.payload) == (7, item.previous, {"k": 1})


def test_a_newly_built_item_is_stored_as_it_is_and_a_stored_one_is_copied() -> None:
    scheduler = InMemoryScheduler(clock=ManualClock(T0))
    built = ScheduleItem("t", TIMER, T0 + timedelta(hours=1))
    stored = scheduler.schedule(built)
    assert stored is built and stored.generation > 0
    again = scheduler.schedule(stored)  # a second schedule: a new form, a new generation
    assert again is not stored and again.generation > stored.generation
    assert scheduler.get("t") is again
    assert stored.key != again.key


def test_an_items_hash_agrees_with_equality_and_survives_being_scheduled() -> None:
    item = ScheduleItem("t", TIMER, T0)
    seen = {item}
    with InMemoryScheduler(clock=ManualClock(T0)) as scheduler:
        stored = scheduler.schedule(item)
    assert stored is item and item.generation > 0
    assert item in seen
    assert hash(item.with_generation(7)) == hash(item) and item.with_generation(7) == item
