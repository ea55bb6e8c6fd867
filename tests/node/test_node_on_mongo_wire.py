"""NodeScheduler over MongoTimerStore on the wire server, in real time: two nodes fire each
timer once, judging time by MongoDB's clock."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from flowsched import ScheduleItem, ScheduleKind

pymongo = pytest.importorskip("pymongo")

from flowsched.mongo import MongoTimerStore  # noqa: E402
from flowsched.node.scheduler import NodeScheduler  # noqa: E402

URI = os.environ.get("FLOWSCHED_MONGO_URI")
WAIT = 60.0  # an upper bound against a hang, not a timing assertion


@pytest.mark.skipif(not URI, reason="FLOWSCHED_MONGO_URI unset")
def test_two_nodes_fire_each_timer_once() -> None:
    client: Any = pymongo.MongoClient(URI, tz_aware=True)
    database = client[f"flowsched_node_{uuid.uuid4().hex[:8]}"]
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def work(item: ScheduleItem, attempt: int) -> None:
        with lock:
            seen[item.id] += 1

    nodes = [
        NodeScheduler(
            MongoTimerStore(database.timers),
            node_id=f"n{i}",
            poll_interval=timedelta(milliseconds=100),
        )
        for i in range(2)
    ]
    try:
        for node in nodes:
            node.register("work", work)
            node.start()
        now = nodes[0].now()
        ids = [f"t{n}" for n in range(20)]
        for item_id in ids:
            nodes[0].schedule(ScheduleItem(item_id, ScheduleKind.TIMER, now, handler="work"))
        deadline = time.monotonic() + WAIT
        while any(nodes[0].exists(item_id) for item_id in ids):
            assert time.monotonic() < deadline, f"not all fired: {sorted(seen)}"
            time.sleep(0.05)
    finally:
        for node in nodes:
            node.close()
        client.drop_database(database.name)
        client.close()
    assert seen == Counter({item_id: 1 for item_id in ids})
