"""kill -9 with max_attempts=1: a dead node's claims whose handler never started are not
failures. They come back at lease end - no attempt counted, no backoff, no dead letter -
and only the delivery whose handler had started counts (and, at max_attempts=1, dies)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from mongo_nodes import Nodes, deliveries, schedule_spread, wait_until

pytestmark = [pytest.mark.wire, pytest.mark.slow]

LEASE = 3.0
POLL = 0.2


def test_never_started_claims_of_a_killed_node_are_redelivered_uncounted(
    nodes: Nodes, mongo_db: Any
) -> None:
    # One worker, a handler that sleeps: the victim starts one delivery and holds the rest
    # of its batch queued, unstarted.
    victim = {"lease": LEASE, "poll": POLL, "workers": 1, "handler_seconds": 60.0}
    nodes.start("victim", max_attempts=1, **victim)
    ids = schedule_spread(mongo_db, 20, timedelta(0), timedelta(milliseconds=100))
    timers = mongo_db["timers"]
    wait_until(
        lambda: (
            timers.count_documents({"claim.owner": "victim"}) == len(ids)
            and mongo_db["deliveries"].count_documents({}) == 1
        ),
        60,
        "the victim to hold every item and run one",
    )
    nodes.start("rescuer", max_attempts=1, lease=LEASE, poll=POLL)
    time.sleep(0.5)  # the rescuer polls; every item is still leased to the victim
    assert mongo_db["deliveries"].count_documents({"node": "rescuer"}) == 0
    nodes.kill("victim")
    killed_at = time.time()

    dead = mongo_db["timers_dead"]
    wait_until(lambda: timers.count_documents({}) == 0, 60, "every item delivered or dead")
    records = deliveries(mongo_db)
    (started,) = [r["item"] for r in records if r["node"] == "victim"]
    rescued = [r for r in records if r["node"] == "rescuer"]

    # The one delivery that started died with its node: at max_attempts=1 that is its end.
    assert [d["_id"] for d in dead.find()] == [started]
    # Every other item ran, once, on the rescuer, as a first attempt.
    assert sorted(r["item"] for r in rescued) == sorted(ids - {started})
    assert {r["attempt"] for r in rescued} == {0}
    # ... as soon as the victim's lease ran out: no redelivery backoff on top.
    latest = max(r["at"] for r in rescued) - killed_at
    assert latest <= LEASE + POLL + 1.0, f"last redelivery {latest:.2f}s after the kill"
