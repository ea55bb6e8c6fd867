"""The simulated database seam: faults come from virtual time and the plan only."""

from datetime import timedelta

import mongomock
import pytest
from pymongo.errors import AutoReconnect

from flowsched.testing.simulation._world import (
    EPOCH,
    FaultyCollection,
    NodeClock,
    NodeKilled,
    ReferenceClock,
    StoreFaults,
)


def _world() -> tuple[ReferenceClock, StoreFaults, object, FaultyCollection, list[bool]]:
    clock, faults = ReferenceClock(), StoreFaults(seed=1)
    raw = mongomock.MongoClient()["db"]["items"]
    killed = [False]
    return clock, faults, raw, FaultyCollection(raw, "n0", clock, faults, lambda: killed[0]), killed


def test_an_outage_fails_every_operation_with_a_transient_error_until_it_ends() -> None:
    clock, faults, _, view, _ = _world()
    faults.outages.append((EPOCH, EPOCH + timedelta(seconds=5)))
    with pytest.raises(AutoReconnect):
        view.find_one({})
    with pytest.raises(AutoReconnect):
        view.database["items_dead"].insert_one({"_id": 1})
    clock.now = EPOCH + timedelta(seconds=5)
    assert view.find_one({}) is None


def test_a_lost_reply_applies_the_write_then_raises_a_transient_error() -> None:
    _, faults, raw, view, _ = _world()
    faults.lossy.append((EPOCH, EPOCH + timedelta(seconds=60)))
    faults.loss = 1.0
    with pytest.raises(AutoReconnect, match="applied"):
        view.insert_one({"_id": "a"})
    assert raw.find_one({"_id": "a"}) == {"_id": "a"}  # type: ignore[attr-defined]


def test_whether_a_reply_is_lost_depends_on_the_instant_not_on_how_often_it_is_asked() -> None:
    faults = StoreFaults(seed=7, lossy=[(EPOCH, EPOCH + timedelta(seconds=60))])
    instants = [EPOCH + timedelta(milliseconds=n) for n in range(400)]
    fates = [faults.loses_reply(when, "n1", "update_many") for when in instants]
    assert fates == [faults.loses_reply(when, "n1", "update_many") for when in instants]
    assert 120 < sum(fates) < 280  # about half
    assert not faults.loses_reply(EPOCH + timedelta(seconds=60), "n1", "update_many")


def test_a_killed_node_reaches_nothing_and_nothing_retries_it() -> None:
    _, _, _, view, killed = _world()
    killed[0] = True
    with pytest.raises(NodeKilled):
        view.find_one({})


def test_hello_tells_the_database_time_and_a_node_clock_adds_its_skew() -> None:
    clock, _, _, view, _ = _world()
    clock.now = EPOCH + timedelta(seconds=42)
    assert view.database.command("hello")["localTime"] == clock.now
    assert view.database.client.admin.command({"hello": 1})["localTime"] == clock.now
    node = NodeClock(clock)
    node.skew = timedelta(seconds=-30)
    assert node.now() == EPOCH + timedelta(seconds=12)
    assert node.monotonic() == 42.0
