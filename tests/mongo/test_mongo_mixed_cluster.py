"""Two ``AsyncMongoScheduler`` processes and one ``MongoScheduler`` process on one collection
(wire server) are one cluster: claims, leases and fences hold across them. One node is
killed with SIGKILL mid-batch: nothing is lost, and only the items it held when it died are
delivered again (at least once: their handlers may have run before the kill); the live nodes
never deliver an item twice.

Nodes: ``tests/mongo/async_node.py`` and ``tests/mongo/node.py`` (same arguments, same records).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from mongo_nodes import (
    Nodes,
    Spread,
    all_done,
    deliveries,
    kill_while_holding,
    wait_until,
)

pytestmark = [pytest.mark.wire, pytest.mark.slow]


@pytest.mark.parametrize("victim", ["async-1", "sync-1"])
def test_two_async_nodes_and_a_sync_node_lose_nothing_when_one_is_killed(
    mongo_uri: str, mongo_db: Any, victim: str
) -> None:
    async_nodes = Nodes(mongo_uri, mongo_db.name, module="tests.mongo.async_node")
    sync_nodes = Nodes(mongo_uri, mongo_db.name)
    options = {"lease": 3.0, "handler_seconds": 0.2, "redelivery": 0.3}
    try:
        async_nodes.start("async-1", "async-2", **options)
        sync_nodes.start("sync-1", **options)
        # Due over 6 s, so the victim is still claiming when it is seen delivering. One
        # delivery is enough to be under way: the async nodes run a batch all at once and
        # may leave the threaded node, with its 8 workers, only a small share.
        victims = async_nodes if victim.startswith("async") else sync_nodes
        with Spread(mongo_db, 400, timedelta(seconds=1), timedelta(seconds=6)) as spread:
            held = kill_while_holding(mongo_db, victims, victim)
            ids = spread.join()
        wait_until(lambda: all_done(mongo_db, ids), 120, "every item to be delivered")
        async_nodes.stop()
        sync_nodes.stop()
    finally:
        async_nodes.kill_all()
        sync_nodes.kill_all()

    records = deliveries(mongo_db)
    assert {r["item"] for r in records} == ids  # 0 lost
    per_item = Counter(r["item"] for r in records)
    again = {item for item, count in per_item.items() if count > 1}
    assert again <= held  # delivered twice: only what the victim held when it died
    survivors = Counter(r["item"] for r in records if r["node"] != victim)
    assert [item for item, count in survivors.items() if count > 1] == []  # 0 duplicates
    assert {r["node"] for r in records} >= {"async-1", "async-2", "sync-1"}
    assert mongo_db["timers"].count_documents({}) == 0
    assert list(mongo_db["timers_dead"].find()) == []
