"""Routing across processes (wire server): nodes serving different handlers and flows on one
collection each fire exactly their own timers; what no node serves waits, is reported by
``flowsched timers stats``, and fires once a node serving it starts.

Nodes are ``python -m tests.mongo.route_node`` (see that module for what they record).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mongo_nodes import Nodes, wait_until
from route_node import flow_domain
from typer.testing import CliRunner

from flowsched.cli import build_app
from flowsched.mongo import MongoScheduler

pytestmark = [pytest.mark.wire, pytest.mark.slow]

PER_HANDLER = {"alpha": 150, "beta": 150, "gamma": 50}
FLOW_INSTANCES = 20  # per flow


@pytest.fixture
def route_nodes(mongo_uri: str, mongo_db: Any) -> Any:
    group = Nodes(mongo_uri, mongo_db.name, module="tests.mongo.route_node")
    yield group
    group.kill_all()


def schedule_work(db: Any) -> dict[str, str]:
    """The timers and flow instances of the test; ``{timer id: handler}``."""
    # Never started: it only writes. Its domain registers both flows but never sweeps.
    scheduler = MongoScheduler(db["timers"], node_id="test")
    first = datetime.now(UTC) + timedelta(seconds=1)
    expected = {}
    for handler, count in PER_HANDLER.items():
        for n in range(count):
            due = first + timedelta(seconds=2) * n / count
            timer_id = f"{handler}-{n:03}"
            scheduler.create_single_timer(timer_id, due, handler, {"n": n})
            expected[timer_id] = handler
    domain = flow_domain(scheduler, db, ["FA", "FB"], "test")
    for n in range(FLOW_INSTANCES):
        domain.start("FA", f"fa-{n:02}")
        domain.start("FB", f"fb-{n:02}")
    return expected


def stats(uri: str, db: Any) -> dict[str, Any]:
    app = build_app()
    args = ["timers", "stats", "--json", "--uri", uri, "--db", db.name, "--timeout", "10s"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_each_node_fires_only_what_it_serves_and_nothing_is_lost(
    route_nodes: Nodes, mongo_db: Any, mongo_uri: str
) -> None:
    route_nodes.start("node-a", handlers="alpha", flows="FA")  # type: ignore[arg-type]
    route_nodes.start("node-b", handlers="beta", flows="FB")  # type: ignore[arg-type]
    expected = schedule_work(mongo_db)
    served = PER_HANDLER["alpha"] + PER_HANDLER["beta"]

    def settled() -> bool:
        return (
            mongo_db["deliveries"].count_documents({}) >= served
            and mongo_db["fired"].count_documents({}) >= 2 * FLOW_INSTANCES
            and mongo_db["timers"].count_documents({}) == PER_HANDLER["gamma"]
        )

    wait_until(settled, 60, "alpha, beta, FA and FB timers to fire")
    report = stats(mongo_uri, mongo_db)
    route_nodes.stop("node-a", "node-b")

    # What no node serves waits, and the operator can see it.
    gamma = [r for r in report["routes"] if r["route"] == "h:gamma"]
    assert [(r["handler"], r["pending"], r["served_by"]) for r in gamma] == [("gamma", 50, [])]
    assert report["unserved_routes"] == ["h:gamma"]
    nodes = {n["node"]: n["routes"] for n in report["nodes"]}
    assert nodes == {"node-a": ["h:alpha", "h:flow:FA"], "node-b": ["h:beta", "h:flow:FB"]}
    assert mongo_db["timers_nodes"].count_documents({}) == 0  # removed on close
    assert all(mongo_db["timers"].find_one({"_id": f"gamma-{n:03}"}) for n in range(50))

    route_nodes.start("node-c", handlers="gamma")  # type: ignore[arg-type]
    wait_until(
        lambda: (
            mongo_db["timers"].count_documents({}) == 0
            and mongo_db["deliveries"].count_documents({}) >= len(expected)
        ),
        60,
        "gamma's timers to fire on node-c",
    )
    route_nodes.stop()

    records = list(mongo_db["deliveries"].find({}, {"_id": 0}))
    per_item = Counter(r["item"] for r in records)
    assert set(per_item) == set(expected)  # 0 lost
    assert [item for item, count in per_item.items() if count > 1] == []  # once each
    node_of = {"alpha": "node-a", "beta": "node-b", "gamma": "node-c"}
    wrong = [r for r in records if r["node"] != node_of[expected[r["item"]]]]
    assert wrong == []  # 0 on the wrong node
    fired = list(mongo_db["fired"].find({}, {"_id": 0}))
    per_flow = Counter(f["flow_id"] for f in fired)
    assert sorted(per_flow) == sorted(
        [f"fa-{n:02}" for n in range(FLOW_INSTANCES)]
        + [f"fb-{n:02}" for n in range(FLOW_INSTANCES)]
    )
    assert set(per_flow.values()) == {1}
    assert {(f["flow"], f["node"]) for f in fired} == {("FA", "node-a"), ("FB", "node-b")}
    states = Counter(doc["state"] for doc in mongo_db["instances"].find({}, {"state": 1}))
    assert states == {"TimedOut": 2 * FLOW_INSTANCES}
