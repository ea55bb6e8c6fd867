"""``flowsched timers nodes``: the live nodes, their routes and each one's clock offset."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from flowsched.mongo.nodes import Heartbeat

MIN = timedelta(minutes=1)


def test_nodes_lists_each_live_node_with_its_clock_offset(namespace, clock, timers):
    # Heartbeats carry a TTL index, which mongomock applies on the real clock: run at now.
    clock.set(datetime.now(UTC).replace(microsecond=0))
    namespace.timer("plain", 5 * MIN)
    nodes = namespace.store.nodes
    Heartbeat(nodes, "node-a", 3 * MIN).beat(
        frozenset({"k:TIMER"}), clock.now(), timedelta(milliseconds=-1250)
    )
    Heartbeat(nodes, "node-b", 3 * MIN).beat(frozenset({"h:alpha"}), clock.now())
    Heartbeat(nodes, "node-dead", 3 * MIN).beat(frozenset(), clock.now() - 60 * MIN)

    code, out, _ = timers("nodes")

    assert code == 0
    lines = out.splitlines()[1:]
    assert lines[0].split() == ["node", "clock", "offset", "last", "heartbeat", "routes"]
    assert lines[1].split()[:2] == ["node-a", "-1.250s"]
    assert lines[1].split()[-1] == "k:TIMER"
    assert lines[2].split()[:3] == ["node-b", "not", "measured"]
    assert len(lines) == 3  # node-dead's heartbeat has expired
    data = json.loads(timers("nodes", "--json")[1])
    assert [(n["node"], n["clock_offset_seconds"]) for n in data["nodes"]] == [
        ("node-a", -1.25),
        ("node-b", None),
    ]
