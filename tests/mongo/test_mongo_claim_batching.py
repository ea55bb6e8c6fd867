"""The sweep claims due items oldest first, in batches, and only kinds it has handlers for."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched.port import ScheduleItem, ScheduleKind


def test_run_due_delivers_every_due_item_across_several_batches(make, clock, collection):
    scheduler = make(batch_size=7)
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    for n in range(30):
        scheduler.schedule(ScheduleItem(f"t-{n:02}", ScheduleKind.TIMER, clock.now()))
    scheduler.schedule(ScheduleItem("later", ScheduleKind.TIMER, clock.now() + timedelta(1)))
    assert scheduler.run_due() == 30
    assert sorted(fired) == [f"t-{n:02}" for n in range(30)]
    assert [d["_id"] for d in collection.find()] == ["later"]


def test_a_claim_takes_at_most_batch_size_items(make, clock):
    scheduler = make(batch_size=4)
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    for n in range(10):
        scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, clock.now()))
    assert scheduler._claimer.take(4).won == 4


@pytest.mark.parametrize("batch_size", [1, 100])
def test_items_are_delivered_oldest_due_first(make, clock, batch_size):
    scheduler = make(batch_size=batch_size)
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    start = clock.now()
    for name, offset in [("third", 3), ("first", 1), ("second", 2)]:
        due = start + timedelta(seconds=offset)
        scheduler.schedule(ScheduleItem(name, ScheduleKind.TIMER, due))
    clock.advance(timedelta(seconds=3))
    scheduler.run_due()
    assert fired == ["first", "second", "third"]


def test_items_of_unsubscribed_kinds_stay_unclaimed(make, clock, collection):
    scheduler = make()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    scheduler.schedule(ScheduleItem("retry", ScheduleKind.ACTION_RETRY, clock.now()))
    assert scheduler.run_due() == 0
    assert collection.find_one({"_id": "retry"})["claim"] is None

    other = make()
    other.subscribe(ScheduleKind.ACTION_RETRY, lambda item, attempt: None)
    assert other.run_due() == 1
    assert not other.exists("retry")


def test_nothing_is_due_before_the_manual_clock_moves(make, clock):
    scheduler = make()
    fired: list[str] = []
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now() + timedelta(seconds=1)))
    assert scheduler.run_due() == 0
    clock.advance(timedelta(seconds=1))  # not started: the clock does not drive it
    assert fired == []
    assert scheduler.run_due() == 1 and fired == ["t"]


def test_once_started_on_a_manual_clock_advance_delivers(make, clock):
    scheduler = make()
    seen: list[tuple[str, object]] = []
    scheduler.subscribe(
        ScheduleKind.TIMER, lambda item, attempt: seen.append((item.id, clock.now()))
    )
    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now() + timedelta(seconds=1)))
    scheduler.start()  # no background thread with a ManualClock: attached to it instead
    clock.advance(timedelta(seconds=5))
    assert seen == [("t", clock.now() - timedelta(seconds=4))]
    assert scheduler.run_due() == 0
    scheduler.close()
    scheduler.schedule(ScheduleItem("u", ScheduleKind.TIMER, clock.now()))
    clock.advance(timedelta(seconds=1))  # closed: detached from the clock
    assert [item_id for item_id, _ in seen] == ["t"]


def test_the_claim_query_tells_when_the_next_item_falls_due(make, clock):
    scheduler = make()
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    soon = clock.now() + timedelta(milliseconds=400)
    scheduler.schedule(ScheduleItem("soon", ScheduleKind.TIMER, soon))
    scheduler.schedule(ScheduleItem("later", ScheduleKind.TIMER, clock.now() + timedelta(5)))
    harvest = scheduler._claimer.take(10, lookahead=timedelta(seconds=1))
    assert (harvest.won, harvest.next_ready) == (0, soon)  # nothing claimed before it is due
    assert scheduler._claimer.take(10).next_ready is None  # no lookahead, no peek
