"""``pause`` and ``resume`` on all four schedulers; on MongoDB across a restart, across two
nodes, and racing a claim (CONTRACT section 18)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from steering_kit import MIN, NOW, mongomock_collection

from flowsched import ManualClock, MongoScheduler, Recurrence, ScheduleItem, ScheduleKind
from flowsched.mongo import MongoTimerStore
from flowsched.mongo.commands import Find, drive
from flowsched.outcomes import Redeliver
from flowsched.store import Settlement

HOUR = timedelta(hours=1)


def test_a_paused_timer_fires_nothing_and_still_exists(face):
    face.on_timer()
    face.schedule("held", MIN)
    face.schedule("other", MIN)

    assert face.call("pause", "held") is True
    face.advance(10 * MIN)

    assert face.fired_ids() == ["other"]
    assert face.call("exists", "held") is True
    assert face.call("get", "held").due == NOW + MIN
    assert face.info("held").state == "paused"


def test_resume_makes_an_overdue_one_shot_timer_due_now(face):
    face.on_timer()
    face.schedule("held", MIN)
    face.call("pause", "held")
    face.advance(10 * MIN)

    assert face.call("resume", "held") is True

    assert face.info("held").state == "scheduled"
    assert face.info("held").due == NOW + 10 * MIN
    face.advance(timedelta(seconds=1))
    assert face.fired == [("held", NOW + 10 * MIN)]
    assert face.call("exists", "held") is False


def test_resume_before_the_due_time_keeps_it(face):
    face.on_timer()
    face.schedule("held", 10 * MIN)
    face.call("pause", "held")
    face.advance(MIN)

    assert face.call("resume", "held") is True
    face.advance(20 * MIN)

    assert face.fired == [("held", NOW + 10 * MIN)]  # once, at its own due time


def test_a_recurring_timer_goes_on_at_its_next_slot_without_replaying_missed_ones(face):
    face.on_timer()
    every = Recurrence.every(HOUR, start=NOW)
    face.call("schedule", ScheduleItem("hourly", ScheduleKind.TIMER, NOW + HOUR, recurrence=every))
    face.advance(HOUR)  # 13:00 fires
    assert face.call("pause", "hourly")

    face.advance(3 * HOUR + 20 * MIN)  # 14:00, 15:00, 16:00 pass paused; now 16:20
    assert face.fired_ids() == ["hourly"]
    assert face.call("resume", "hourly") is True
    assert face.info("hourly").due == NOW + 5 * HOUR  # 17:00, not 14:00
    face.advance(2 * HOUR)  # to 18:20

    assert [at for _, at in face.fired] == [NOW + HOUR, NOW + 5 * HOUR, NOW + 6 * HOUR]


def test_unknown_ids_answer_false_and_repeats_change_nothing(face):
    face.schedule("t", MIN)

    assert face.call("pause", "nobody") is False
    assert face.call("resume", "nobody") is False
    assert face.call("resume", "t") is True  # not paused: nothing to do
    assert face.info("t").state == "scheduled"
    assert face.call("pause", "t") is True
    assert face.call("pause", "t") is True
    assert face.ids(state="paused") == ["t"]


def test_a_paused_timer_can_be_cancelled_and_scheduling_again_replaces_it_unpaused(face):
    face.on_timer()
    face.schedule("gone", MIN)
    face.schedule("again", MIN)
    face.call("pause", "gone")
    face.call("pause", "again")

    assert face.call("cancel", "gone") is True
    face.schedule("again", 2 * MIN)
    face.advance(5 * MIN)

    assert face.call("exists", "gone") is False
    assert face.fired_ids() == ["again"]


def test_a_handler_that_pauses_its_own_recurring_timer_stops_it_after_this_run(face):
    face.on_timer(lambda f, item, attempt: f.call("pause", item.id))
    every = Recurrence.every(HOUR, start=NOW)
    face.call("schedule", ScheduleItem("tick", ScheduleKind.TIMER, NOW + HOUR, recurrence=every))

    face.advance(5 * HOUR)

    assert face.fired_ids() == ["tick"]  # the running delivery finished, nothing after it
    info = face.info("tick")
    assert info.state == "paused"
    assert info.due == NOW + 2 * HOUR  # the tick's outcome was applied: the next slot
    face.call("resume", "tick")
    face.advance(HOUR)
    assert [at for _, at in face.fired] == [NOW + HOUR, NOW + 6 * HOUR]


def test_a_failure_while_paused_is_recorded_and_not_redelivered(face):
    def fail_after_pausing(f, item, attempt):
        f.call("pause", item.id)
        raise RuntimeError("boom")

    face.on_timer(fail_after_pausing)
    face.schedule("flaky", MIN)
    face.advance(10 * MIN)

    assert face.fired_ids() == ["flaky"]
    info = face.info("flaky")
    assert (info.state, info.attempts) == ("paused", 1)


# -- MongoDB: the pause is in the document ----------------------------------------------------


def test_a_pause_holds_across_a_restart(make_face, mongo_kind):
    collection = mongomock_collection()
    first = make_face(mongo_kind, collection)
    first.schedule("held", MIN)
    first.schedule("free", MIN)
    first.call("pause", "held")
    first.close()

    restarted = make_face(mongo_kind, collection, node_id="node-a-again")
    restarted.on_timer()
    restarted.advance(10 * MIN)

    assert restarted.fired_ids() == ["free"]
    assert restarted.info("held").state == "paused"
    assert restarted.call("resume", "held")
    restarted.advance(MIN)
    assert restarted.fired_ids() == ["free", "held"]


def test_a_pause_on_one_node_holds_on_every_node(make_face, clock):
    collection = mongomock_collection()
    node_a = make_face("mongo", collection, node_id="node-a")
    node_b = make_face("mongo", collection, node_id="node-b")
    node_a.on_timer()
    node_b.on_timer()
    node_a.schedule("held", MIN)
    node_a.call("pause", "held")

    clock.advance(10 * MIN)
    assert node_a.fired + node_b.fired == []

    assert node_b.call("resume", "held")
    clock.advance(MIN)
    assert sorted(node_a.fired_ids() + node_b.fired_ids()) == ["held"]


def one(op):
    """A procedure of the single operation ``op`` (to drive a procedure step by step)."""
    return (yield op)


@pytest.mark.parametrize("claim", ["claim_due", "claim_started"])
def test_a_claim_racing_a_pause_does_not_take_the_timer(claim):
    collection = mongomock_collection()
    scheduler = MongoScheduler(collection, node_id="n", clock=ManualClock(NOW))
    scheduler.schedule(ScheduleItem("held", ScheduleKind.TIMER, NOW))
    elsewhere = ManualClock(NOW)
    other = MongoTimerStore(collection, clock=elsewhere, node="node-b")
    other.open()

    # node-b's claim, one operation at a time: the pause lands after the claim query read
    # "held" as due and before the claiming write.
    steps = getattr(other.steps, claim)(["k:TIMER"], "node-b", MIN, 10)
    read_it = False
    op = next(steps)
    try:
        while True:
            result = drive(one(op), other.steps.roles)
            if isinstance(op, Find) and not read_it and any(d["_id"] == "held" for d in result):
                read_it = True
                assert scheduler.pause("held")
            op = steps.send(result)
    except StopIteration as done:
        claimed = done.value

    assert read_it
    assert claimed == []
    stored = collection.find_one({"_id": "held"})
    assert (stored.get("claim"), stored.get("deliveries", 0)) == (None, 0)
    elsewhere.advance(HOUR)
    assert getattr(other, claim)(["k:TIMER"], "node-b", MIN, 10) == []
    [info] = scheduler.timers(id_prefix="held").items
    assert (info.id, info.state) == ("held", "paused")


def test_pausing_a_claimed_timer_lets_its_delivery_settle_and_keeps_it_paused(make_face):
    collection = mongomock_collection()
    face = make_face("mongo", collection)
    face.schedule("busy", MIN)
    # Another node, through its store, at the due time: claims and starts the timer.
    elsewhere = ManualClock(NOW + MIN)
    other = MongoTimerStore(collection, clock=elsewhere, node="node-b")
    [claim] = other.claim_started(["k:TIMER"], "node-b", 5 * MIN, 10)
    assert claim.item.id == "busy"
    info = face.info("busy")
    assert (info.state, info.node) == ("claimed", "node-b")
    assert face.ids(state="claimed") == ["busy"]

    assert face.call("pause", "busy")
    elsewhere.advance(MIN)
    [renewed] = other.renew([claim], 5 * MIN)  # the lease goes on
    assert renewed.lease_until == NOW + 7 * MIN

    paused = face.info("busy")
    assert (paused.state, paused.node) == ("paused", "node-b")
    elsewhere.advance(HOUR)
    assert other.claim_due(["k:TIMER"], "node-c", 5 * MIN, 10) == []  # lease over: still held
    assert face.call("resume", "busy")
    assert face.info("busy").state == "claimed"  # its claim stands; the lease end decides
    [again] = other.claim_due(["k:TIMER"], "node-c", 5 * MIN, 10)
    assert again.item.id == "busy"

    # Paused again while node-c delivers it: its failure is written, the timer stays paused.
    assert face.call("pause", "busy")
    retry = Redeliver(NOW + 2 * HOUR, 1, "RuntimeError: down")
    [settled] = other.settle([Settlement(again, retry)])
    assert settled.applied
    after = face.info("busy")
    assert (after.state, after.attempts, after.due) == ("paused", 1, NOW + 2 * HOUR)
    assert after.node is None
