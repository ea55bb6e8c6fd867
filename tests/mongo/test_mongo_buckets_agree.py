"""Every node of one collection counts buckets the same way, or is refused with a clear error.

Every filter by id names the item's bucket (``crc32(id) mod buckets``): a node given another
count would look in the wrong bucket - its ``cancel`` of another node's timer would return
``False`` and the timer would still fire. The first node to use a collection records its count
in ``<name>_settings``; a node with another count gets a ``ConfigError`` naming both counts and
who recorded the collection's, on every call; a started node claims nothing and logs that
error once, and still closes cleanly.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import pytest
from mongo_nodes import eventually

from flowsched import ConfigError
from flowsched.clock import SystemClock
from flowsched.mongo.documents import bucket_of
from flowsched.mongo.store import recorded_buckets
from flowsched.port import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER
# An id outside bucket 0 of 4: a node counting one bucket would look for it in bucket 0.
FAR = next(f"t-{i}" for i in range(100) if bucket_of(f"t-{i}", 4) != 0)


def test_the_first_node_records_its_count_and_the_same_count_is_accepted(make, collection, clock):
    first = make(buckets=4, node_id="node-a")
    first.schedule(ScheduleItem(FAR, TIMER, clock.now() + timedelta(minutes=1)))

    recorded = collection.database["timers_settings"].find_one({"_id": "buckets"})
    assert (recorded["value"], recorded["recorded_by"]) == (4, "node-a")
    assert recorded_buckets(collection) == 4

    second = make(buckets=4, node_id="node-b")
    assert second.cancel(FAR) is True


def test_a_node_with_another_count_is_refused_naming_both_counts(make, clock):
    first = make(buckets=4, node_id="node-a")
    first.schedule(ScheduleItem(FAR, TIMER, clock.now() + timedelta(minutes=1)))
    other = make(buckets=1, node_id="node-b")

    with pytest.raises(ConfigError) as refused:
        other.cancel(FAR)  # without the check: False, and the timer would still fire

    message = str(refused.value)
    assert message.startswith("buckets = 1: but flowsched.timers spreads its timers over 4 ")
    assert "recorded by 'node-a' in flowsched.timers_settings" in message
    assert "give this node buckets=4" in message
    # Refused on every call, and nothing was changed.
    with pytest.raises(ConfigError, match="over 4 bucket"):
        other.schedule(ScheduleItem("t-new", TIMER, clock.now()))
    assert first.exists(FAR) and not first.exists("t-new")


def test_a_started_node_with_another_count_claims_nothing_and_says_why(
    make, collection: Any, caplog: pytest.LogCaptureFixture
) -> None:
    writer = make(buckets=4, node_id="node-a")  # the ManualClock: START, long past
    item = writer.schedule(ScheduleItem(FAR, TIMER, writer.now()))
    delivered: list[str] = []
    poll = timedelta(milliseconds=50)
    wrong = make(buckets=1, node_id="node-b", clock=SystemClock(), poll_interval=poll)
    wrong.subscribe(TIMER, lambda item, attempt: delivered.append(item.id))

    with caplog.at_level(logging.ERROR, logger="flowsched.node"):
        wrong.start()
        assert eventually(lambda: bool(refusals(caplog)))
        time.sleep(0.5)  # more turns (retried after 0.05 s each), none of which may claim
        wrong.close()  # the refused node closes cleanly (its heartbeat is refused too)

    assert len(refusals(caplog)) == 1  # said once, not every poll
    [record] = [r for r in caplog.records if "over 4 bucket" in r.getMessage()]
    assert record.levelno == logging.ERROR  # its settings, not an outage: no retry mends them
    assert "node node-b claims nothing" in record.getMessage()
    assert delivered == []
    assert collection.find_one({"_id": item.id}).get("deliveries", 0) == 0


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "over 4 bucket" in r.getMessage()]
