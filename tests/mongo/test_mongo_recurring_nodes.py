"""Three scheduler processes on one collection (wire server) with an ``every 1s`` schedule:
each slot is applied exactly once, in order, each tick told the slot applied before it.

Each node is ``python -m tests.mongo.tick_node``; its handler records every tick in the
``ticks`` collection as ``{slot, previous, node, at}``.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from mongo_nodes import Nodes, wait_until

from flowsched import MongoScheduler, Recurrence

pytestmark = [pytest.mark.wire, pytest.mark.slow]

SECOND = timedelta(seconds=1)


@pytest.fixture
def ticking(mongo_uri: str, mongo_db: Any) -> Iterator[Nodes]:
    group = Nodes(mongo_uri, mongo_db.name, module="tests.mongo.tick_node")
    yield group
    group.kill_all()


def run_every_second(ticking: Nodes, mongo_db: Any, seconds: float, **options: float) -> list[Any]:
    """Start three nodes, schedule ``every 1s``, let it tick, stop the nodes gracefully; the
    ticks recorded, in the order they were applied."""
    ticking.start("n1", "n2", "n3", **options)
    scheduler = MongoScheduler(mongo_db["timers"], node_id="test")
    scheduler.schedule_recurring("every-second", Recurrence.every(SECOND))
    time.sleep(seconds)
    ticking.stop()
    return list(mongo_db["ticks"].find({}, {"_id": 0}).sort("at", 1))


def assert_applied_once_in_order(ticks: list[Any], seconds: float) -> None:
    slots = [t["slot"] for t in ticks]
    assert [slot for slot, count in Counter(slots).items() if count > 1] == []
    assert slots == sorted(slots), "slots were not applied in increasing order"
    # Each tick was told the slot applied just before it: one history, no fork.
    assert [t["previous"] for t in ticks] == [None, *slots[:-1]]
    # Nearly every slot ran: a slot is skipped only when a later one was already due.
    expected = int(seconds) - 1
    assert len(slots) >= expected * 0.8, f"only {len(slots)} of about {expected} slots ran"


def test_three_nodes_apply_each_slot_of_an_every_second_schedule_once(
    ticking: Nodes, mongo_db: Any
) -> None:
    ticks = run_every_second(ticking, mongo_db, 10.5)
    assert_applied_once_in_order(ticks, 10.5)
    assert mongo_db["timers"].count_documents({}) == 1  # still scheduled, not removed


def test_a_node_stalled_mid_tick_past_its_lease_does_not_make_its_slot_run_twice(
    ticking: Nodes, mongo_db: Any
) -> None:
    options = {"lease": 2.0, "poll": 0.2}
    ticking.start("victim", freeze_on_first_tick=1, **options)
    scheduler = MongoScheduler(mongo_db["timers"], node_id="test")
    scheduler.schedule_recurring("every-second", Recurrence.every(SECOND))
    events = mongo_db["events"]
    wait_until(lambda: events.count_documents({}) > 0, 30, "the victim to freeze in a tick")
    frozen_slot = events.find_one()["frozen"]

    # The victim holds the claim but no longer renews it: after the lease, others take over.
    ticking.start("n2", "n3", **options)
    ticks = mongo_db["ticks"]
    wait_until(lambda: ticks.count_documents({}) >= 4, 60, "the other nodes to tick")
    ticking.running["victim"].send_signal(signal.SIGCONT)
    wait_until(lambda: ticks.count_documents({"node": "victim"}) >= 1, 30, "the victim's tick")
    ticking.stop()

    applied = list(ticks.find({}, {"_id": 0}).sort("at", 1))
    assert (applied[0]["node"], applied[0]["slot"]) == ("victim", frozen_slot)
    assert all(t["slot"] > frozen_slot for t in applied[1:])
    assert_applied_once_in_order(applied, 0)
