"""MongoDB routing bookkeeping: the node heartbeat in ``<name>_nodes`` and the warning about
items stored before routing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from mongo_nodes import wait_until

from flowsched.mongo.nodes import MIN_TTL, live_nodes, node_ttl
from flowsched.port import ScheduleItem, ScheduleKind

POLL = timedelta(milliseconds=50)


def test_a_started_node_advertises_its_routes_until_it_closes(make, collection):
    nodes = collection.database["timers_nodes"]
    node = make(node_id="node-a", clock=None, poll_interval=POLL)  # real time: it sweeps
    node.register("alpha", lambda item, attempt: None)
    node.start()

    def advertised() -> list[tuple[str, tuple[str, ...]]]:
        return [(n.node_id, n.routes) for n in live_nodes(nodes, datetime.now(UTC))]

    wait_until(lambda: advertised() == [("node-a", ("h:alpha",))], 10, "the first heartbeat")
    node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)  # a route more: at once
    wait_until(lambda: advertised() == [("node-a", ("h:alpha", "k:TIMER"))], 10, "the new route")
    [document] = nodes.find()
    assert document["expires_at"] - document["renewed_at"] == MIN_TTL  # 3 polls < 5 s

    node.close()
    assert nodes.count_documents({}) == 0


def test_a_heartbeat_lasts_three_polls_and_at_least_five_seconds():
    assert node_ttl(timedelta(milliseconds=200)) == timedelta(seconds=5)
    assert node_ttl(timedelta(seconds=10)) == timedelta(seconds=30)


def legacy_timer(collection, clock, item_id: str) -> None:
    now = clock.now()
    collection.insert_one(
        {
            "_id": item_id,
            "kind": "TIMER",
            "due": now,
            "ready_at": now,
            "flow_id": None,
            "payload": None,
            "generation": 1,
            "attempts": 0,
            "deliveries": 0,
            "last_error": None,
            "claim": None,
        }
    )


def test_start_warns_once_about_items_stored_before_routing(make, collection, clock, caplog):
    legacy_timer(collection, clock, "old-1")
    legacy_timer(collection, clock, "old-2")
    node = make()
    node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)

    with caplog.at_level(logging.WARNING, logger="flowsched.mongo"):
        node.start()
        node.start()  # idempotent: no second look
        assert node.run_due() == 0  # nobody claims them until they are migrated

    warnings = [r.getMessage() for r in caplog.records if "before routing" in r.getMessage()]
    assert len(warnings) == 1
    assert "old-1" in warnings[0] and "flowsched timers migrate" in warnings[0]


def test_a_background_node_warns_too_and_a_routed_collection_gets_no_warning(
    make, collection, clock, caplog
):
    legacy_timer(collection, clock, "old-1")
    with caplog.at_level(logging.WARNING, logger="flowsched.mongo"):
        node = make(clock=None, poll_interval=POLL)
        node.start()
        wait_until(lambda: "before routing" in caplog.text, 10, "the warning")
        node.close()
    assert caplog.text.count("before routing") == 1

    caplog.clear()
    collection.delete_many({})
    clean = make()
    clean.schedule(ScheduleItem("new", ScheduleKind.TIMER, clock.now()))
    with caplog.at_level(logging.WARNING, logger="flowsched.mongo"):
        clean.start()
    assert "before routing" not in caplog.text
