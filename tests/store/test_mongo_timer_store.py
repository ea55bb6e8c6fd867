"""MongoTimerStore passes the store conformance suite on mongomock and on the wire server."""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

import pytest

from flowsched import ManualClock
from flowsched.testing import check_timer_store

mongomock = pytest.importorskip("mongomock")
pymongo = pytest.importorskip("pymongo")

from flowsched.mongo import MongoTimerStore  # noqa: E402


def test_passes_on_mongomock() -> None:
    client: Any = mongomock.MongoClient(tz_aware=True)

    def fresh(clock: ManualClock) -> MongoTimerStore:
        return MongoTimerStore(client.db[f"t_{uuid.uuid4().hex[:8]}"], clock=clock)

    check_timer_store(fresh)


def test_refuses_what_is_not_a_collection() -> None:
    with pytest.raises(TypeError, match="pymongo Collection"):
        MongoTimerStore({"not": "a collection"})  # type: ignore[arg-type]


@pytest.mark.skipif(not os.environ.get("FLOWSCHED_MONGO_URI"), reason="FLOWSCHED_MONGO_URI unset")
def test_passes_on_the_wire_server() -> None:
    client: Any = pymongo.MongoClient(os.environ["FLOWSCHED_MONGO_URI"], tz_aware=True)
    database = client[f"flowsched_store_{uuid.uuid4().hex[:8]}"]
    try:

        def fresh(clock: ManualClock) -> MongoTimerStore:
            return MongoTimerStore(database[f"t_{uuid.uuid4().hex[:8]}"], clock=clock)

        check_timer_store(fresh)
    finally:
        client.drop_database(database.name)
        client.close()


def test_a_node_scheduler_over_it_keeps_the_port_on_mongomock() -> None:
    from flowsched import RedeliveryPolicy
    from flowsched.node.scheduler import NodeScheduler
    from flowsched.testing import check_scheduler_port

    client: Any = mongomock.MongoClient(tz_aware=True)

    def build(clock: ManualClock, policy: RedeliveryPolicy | None = None) -> NodeScheduler:
        store = MongoTimerStore(client.db[f"t_{uuid.uuid4().hex[:8]}"], clock=clock)
        return NodeScheduler(store, clock=clock, redelivery=policy)

    check_scheduler_port(build, redelivery_factory=build)


@pytest.mark.skipif(not os.environ.get("FLOWSCHED_MONGO_URI"), reason="FLOWSCHED_MONGO_URI unset")
def test_passes_on_the_wire_server_on_its_own_time(caplog: pytest.LogCaptureFixture) -> None:
    client: Any = pymongo.MongoClient(os.environ["FLOWSCHED_MONGO_URI"], tz_aware=True)
    database = client[f"flowsched_store_{uuid.uuid4().hex[:8]}"]
    try:
        with caplog.at_level(logging.WARNING, "flowsched.store"):
            check_timer_store(lambda: MongoTimerStore(database[f"t_{uuid.uuid4().hex[:8]}"]))
        assert caplog.records == [], "a host with no skew was warned"
    finally:
        client.drop_database(database.name)
        client.close()
