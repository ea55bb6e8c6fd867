"""Recurring items in MongoDB: the slot is fenced before the handler runs, so two nodes never
apply one slot, even when a lease runs out during a long tick; documents keep the recurrence
as JSON and the applied slot; a malformed recurrence is quarantined."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched.port import Recurrence, ScheduleItem, ScheduleKind, kind_route

TIMER = ScheduleKind.TIMER
HOUR = timedelta(hours=1)
LEASE = timedelta(seconds=30)


def test_a_tick_that_outlives_its_lease_is_not_repeated_by_another_node(make, clock):
    slow, other = make(lease=LEASE), make(lease=LEASE)
    ticks: list[tuple[str, object]] = []

    def slow_tick(item: ScheduleItem, attempt: int) -> None:
        ticks.append(("slow", item.due))
        # While this tick runs, its lease runs out and the other node sweeps.
        clock.advance(LEASE + timedelta(seconds=1))
        other.run_due()

    slow.subscribe(TIMER, slow_tick)
    other.subscribe(TIMER, lambda item, attempt: ticks.append(("other", item.due)))
    first = slow.schedule_recurring("sweep", Recurrence.every(HOUR))

    clock.advance(HOUR)
    slow.run_due()

    assert ticks == [("slow", first.due)]
    stored = slow.get("sweep")
    assert stored is not None
    assert (stored.previous, stored.due) == (first.due, first.due + HOUR)
    clock.advance(stored.due - clock.now())
    other.run_due()
    assert ticks == [("slow", first.due), ("other", first.due + HOUR)]


def test_a_tick_given_back_on_close_leaves_its_slot_to_run(make, clock):
    closing, other = make(), make()
    ran: list[object] = []
    other.subscribe(TIMER, lambda item, attempt: ran.append(item.due))
    first = closing.schedule_recurring("sweep", Recurrence.every(HOUR))
    clock.advance(HOUR)
    routes = frozenset({kind_route(TIMER)})
    [claim] = closing.store.claim_due(routes, closing.node_id, LEASE, 10)  # not yet started

    assert closing.store.release([claim]) == 1  # closing: given back unrun
    other.run_due()

    assert ran == [first.due]


def test_documents_keep_the_recurrence_as_json_and_the_applied_slot(make, clock, collection):
    scheduler = make()
    scheduler.subscribe(TIMER, lambda item, attempt: None)
    cron = Recurrence.cron("0 2 * * *", "Europe/London")
    stored = scheduler.schedule_recurring("nightly", cron)
    scheduler.schedule(ScheduleItem("once", TIMER, clock.now() + HOUR))

    document = collection.find_one({"_id": "nightly"})
    assert document["recurrence"] == cron.anchored(clock.now()).to_json()
    assert document["applied"] is None
    assert "recurrence" not in collection.find_one({"_id": "once"})

    clock.advance(stored.due - clock.now())
    scheduler.run_due()
    document = collection.find_one({"_id": "nightly"})
    assert document["applied"].replace(tzinfo=None) == stored.due.replace(tzinfo=None)
    assert (document["attempts"], document["deliveries"], document["claim"]) == (0, 0, None)


@pytest.mark.parametrize(
    ("recurrence", "reason"),
    [
        ({"cron": "61 * * * *", "start": "2026-01-01T00:00:00+00:00"}, "bad cron expression"),
        ({"every_seconds": -5, "start": "2026-01-01T00:00:00+00:00"}, "must be positive"),
        ({"every_seconds": 60}, "recurrence has no start"),
        ("hourly", "recurrence must be an object"),
        ({"start": "2026-01-01T00:00:00+00:00"}, "malformed recurrence"),
    ],
)
def test_a_malformed_recurrence_is_quarantined(make, clock, collection, recurrence, reason):
    scheduler = make()
    fired: list[str] = []
    scheduler.subscribe(TIMER, lambda item, attempt: fired.append(item.id))
    scheduler.schedule(ScheduleItem("good", TIMER, clock.now()))
    collection.insert_one(
        {
            "_id": "bad",
            "bucket": 0,
            "kind": "TIMER",
            "route": "k:TIMER",
            "due": clock.now(),
            "ready_at": clock.now(),
            "generation": 1,
            "attempts": 0,
            "deliveries": 0,
            "claim": None,
            "recurrence": recurrence,
            "applied": None,
        }
    )

    assert scheduler.run_due() == 1
    assert fired == ["good"]
    [record] = collection.database["timers_quarantine"].find()
    assert record["item_id"] == "bad"
    assert reason in record["reason"]
    assert collection.count_documents({}) == 0
