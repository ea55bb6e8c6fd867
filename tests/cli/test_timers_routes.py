"""``flowsched timers stats`` by route and ``flowsched timers migrate`` (timers stored before
routing get a route)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from flowsched.cli.timers_render import iso
from flowsched.mongo import MongoScheduler
from flowsched.mongo.nodes import Heartbeat
from flowsched.port import ScheduleItem, ScheduleKind

MIN = timedelta(minutes=1)


def test_stats_lists_pending_items_by_handler_and_flags_routes_no_live_node_serves(
    namespace, clock, timers
):
    # Heartbeats carry a TTL index, which mongomock applies on the real clock: run at now.
    clock.set(datetime.now(UTC).replace(microsecond=0))
    at = [iso(clock.now() + m * MIN) for m in (-10, -8, 5)]
    for n, handler in enumerate(["alpha", "alpha", "gamma"]):
        due = clock.now() + (n - 10) * MIN
        namespace.scheduler.schedule(
            ScheduleItem(f"t-{n}", ScheduleKind.TIMER, due, handler=handler)
        )
    namespace.timer("plain", 5 * MIN)
    nodes = namespace.store.nodes
    Heartbeat(nodes, "node-a", 3 * MIN).beat(frozenset({"h:alpha", "k:TIMER"}), clock.now())
    Heartbeat(nodes, "node-b", 3 * MIN).beat(frozenset({"k:TIMER"}), clock.now())
    # A node that died an hour ago (no close): its heartbeat has expired.
    Heartbeat(nodes, "node-dead", 3 * MIN).beat(frozenset({"h:gamma"}), clock.now() - 60 * MIN)

    code, out, _ = timers("stats")

    assert code == 0
    assert out.splitlines()[6:] == [
        "by route      (pending, oldest due, live nodes serving it)",
        f"  handler alpha       2  {at[0]}  node-a",
        f"  handler gamma       1  {at[1]}  NONE: no live node serves it",
        f"  kind TIMER          1  {at[2]}  node-a, node-b",
        "live nodes    2  (node-a, node-b)",
        "unserved      1 route(s) with pending items and no live node",
    ]
    data = json.loads(timers("stats", "--json")[1])
    assert data["unserved_routes"] == ["h:gamma"]
    assert [(r["handler"], r["pending"], r["served_by"]) for r in data["routes"]] == [
        ("alpha", 2, ["node-a"]),
        ("gamma", 1, []),
        (None, 1, ["node-a", "node-b"]),
    ]
    assert [n["node"] for n in data["nodes"]] == ["node-a", "node-b"]


def legacy(collection, clock, item_id, kind, **fields):
    """A document as versions before routing wrote it: no route, no handler."""
    document = {
        "_id": item_id,
        "kind": kind,
        "due": clock.now() - MIN,
        "ready_at": clock.now() - MIN,
        "flow_id": fields.pop("flow_id", None),
        "payload": fields.pop("payload", None),
        "generation": 1,
        "attempts": 0,
        "deliveries": 0,
        "last_error": None,
        "claim": None,
    }
    collection.insert_one({**document, **fields})


def seed_legacy(namespace, clock):
    collection = namespace.collection
    for n in range(3):
        payload = {"flow": "FA", "state": "S", "action": "A", "entry": 1, "attempt": 1}
        legacy(collection, clock, f"fa-{n}", "ACTION_TIMEOUT", flow_id=f"a{n}", payload=payload)
    payload = {"flow": "FB", "source": "S", "destination": "D", "entry": 1}
    legacy(collection, clock, "fb-0", "PROCESSING_TIMEOUT", flow_id="b0", payload=payload)
    legacy(collection, clock, "plain-0", "TIMER")
    legacy(collection, clock, "plain-1", "TIMER", payload={"flow": "not a flow timer"})
    namespace.dead_letter("fa-dead", "boom", MIN, payload={"flow": "FA"}, flow_id="a9")
    collection.create_index([("kind", 1), ("ready_at", 1)], name="claim")


def test_migrate_routes_flow_timers_to_their_flow_and_the_rest_by_kind(namespace, clock, timers):
    seed_legacy(namespace, clock)

    code, out, err = timers("migrate")

    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "flowsched.timers at mongodb://localhost:27017: routed 6 timer(s)",
        "  h:flow:FA  3",
        "  h:flow:FB  1",
        "  k:TIMER  2",
        "dead letters given their flow's handler: 1",
        "left without a route: 0",
        "the legacy claim index 'claim' (kind, ready_at) is still there: drop it with "
        "--drop-legacy-index once every node runs a version with routing",
    ]
    collection = namespace.collection
    fa = collection.find_one({"_id": "fa-0"})
    assert (fa["route"], fa["handler"]) == ("h:flow:FA", "flow:FA")
    assert collection.find_one({"_id": "plain-1"})["route"] == "k:TIMER"
    assert "handler" not in collection.find_one({"_id": "plain-1"})
    assert namespace.store.dead.find_one({"_id": "fa-dead"})["handler"] == "flow:FA"


def test_migrate_is_idempotent_and_can_drop_the_legacy_index(namespace, clock, timers):
    seed_legacy(namespace, clock)
    timers("migrate")
    before = list(namespace.collection.find().sort("_id", 1))

    code, out, _ = timers("migrate", "--drop-legacy-index")

    assert code == 0
    assert out.splitlines()[1:] == [
        "dead letters given their flow's handler: 0",
        "left without a route: 0",
        "dropped the legacy claim index 'claim' (kind, ready_at)",
    ]
    assert "routed 0 timer(s)" in out.splitlines()[0]
    assert list(namespace.collection.find().sort("_id", 1)) == before
    assert "claim" not in namespace.collection.index_information()
    assert "claim_by_route" in namespace.collection.index_information()


def test_migrated_timers_fire_on_the_node_that_serves_their_route(namespace, clock, timers):
    seed_legacy(namespace, clock)
    node = MongoScheduler(namespace.collection, node_id="fa-node", clock=clock)
    fired: list[str] = []
    node.register("flow:FA", lambda item, attempt: fired.append(item.id))
    assert node.run_due() == 0  # stored before routing: nobody claims them yet

    timers("migrate")

    assert node.run_due() == 3
    assert sorted(fired) == ["fa-0", "fa-1", "fa-2"]
    assert node.get("fb-0").handler == "flow:FB"  # still there, for FB's node
