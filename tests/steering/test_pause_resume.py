"""``pause`` and ``resume`` on all four schedulers; on MongoDB across a restart, across two
nodes, and racing a claim (CONTRACT section 18)."""

from __future__ import annotations

from datetime import timedelta

from steering_kit import MIN, NOW, mongomock_collection

from flowsched import Recurrence, ScheduleItem, ScheduleKind
from flowsched.mongo.claims import Claims
from flowsched.mongo.store import TimerStore

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


def test_a_claim_racing_a_pause_does_not_take_the_timer():
    collection = mongomock_collection()
    store = TimerStore(collection)
    from flowsched import ManualClock, MongoScheduler

    scheduler = MongoScheduler(collection, node_id="n", clock=ManualClock(NOW))
    scheduler.schedule(ScheduleItem("held", ScheduleKind.TIMER, NOW))
    claims = Claims(store, "node-b", MIN)
    found = list(collection.find({}))  # what the claim query read, before the pause
    scheduler.pause("held")

    taken, _ = store.run(
        claims._take(
            ["held"],
            {"route": {"$in": ["k:TIMER"]}, "ready_at": {"$lte": NOW}},
            {"$set": {"claim": {"owner": "node-b", "token": "x", "lease_until": NOW + MIN}}},
            found,
            NOW,
        )
    )
    assert taken == 0
    assert claims.claim(["k:TIMER"], NOW + HOUR, 10).documents == []


def test_pausing_a_claimed_timer_lets_its_delivery_settle_and_keeps_it_paused(make_face):
    collection = mongomock_collection()
    face = make_face("mongo", collection)
    face.schedule("busy", MIN)
    claims = Claims(TimerStore(collection), "node-b", 5 * MIN)
    claimed = claims.claim(["k:TIMER"], NOW + MIN, 10)
    assert [d["_id"] for d in claimed.documents] == ["busy"]
    info = face.info("busy")
    assert (info.state, info.node) == ("claimed", "node-b")
    assert face.ids(state="claimed") == ["busy"]

    assert face.call("pause", "busy")
    assert claims.renew([("busy", claimed.token)], NOW + 2 * MIN) == 1  # the lease goes on

    paused = face.info("busy")
    assert (paused.state, paused.node) == ("paused", "node-b")
    assert claims.claim(["k:TIMER"], NOW + HOUR, 10).documents == []  # lease over: still held
    assert face.call("resume", "busy")
    assert face.info("busy").state == "claimed"  # its claim stands; the lease end decides
    again = claims.claim(["k:TIMER"], NOW + HOUR, 10)
    assert [d["_id"] for d in again.documents] == ["busy"]
