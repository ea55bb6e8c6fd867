"""kill -9 with max_attempts=1: a dead node's claims are not failures by themselves. They
come back at lease end - no attempt counted, no backoff, no dead letter - and run again;
only a run lost twice in a row (flowsched/node/lost.py: ``LOST_TWICE``) counts, as a failed
delivery (``DeliveryLost``). So a handler that kills its node runs twice, then is
dead-lettered."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mongo_nodes import Nodes, deliveries, schedule_spread, wait_until

from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

pytestmark = [pytest.mark.wire, pytest.mark.slow]

LEASE = 3.0
POLL = 0.2


def test_claims_of_a_killed_node_are_redelivered_uncounted(nodes: Nodes, mongo_db: Any) -> None:
    # Four workers, a handler that sleeps: the victim claims a batch, starts four (each
    # start recorded, claim.at) and queues the rest unstarted - four runs under way.
    victim = {"lease": LEASE, "poll": POLL, "workers": 4, "handler_seconds": 60.0}
    nodes.start("victim", max_attempts=1, **victim)
    ids = schedule_spread(mongo_db, 20, timedelta(0), timedelta(milliseconds=100))
    timers = mongo_db["timers"]
    wait_until(
        lambda: mongo_db["deliveries"].count_documents({}) == 4,
        60,
        "the victim to run four items",
    )
    started = {"claim.owner": "victim", "claim.at": {"$type": "date"}}
    assert timers.count_documents(started) == 4  # its running claims
    time.sleep(0.2)  # every item is due before the kill (they are spread over 100 ms)
    nodes.kill("victim")
    killed_at = time.time()
    nodes.start("rescuer", max_attempts=1, lease=LEASE, poll=POLL)

    wait_until(lambda: timers.count_documents({}) == 0, 60, "every item delivered or dead")
    records = deliveries(mongo_db)
    lost = {r["item"] for r in records if r["node"] == "victim"}
    rescued = [r for r in records if r["node"] == "rescuer"]
    assert len(lost) == 4

    # None dead-lettered: a run lost with its node once is no failure; it runs again.
    assert list(mongo_db["timers_dead"].find()) == []
    # Every item ran once on the rescuer, as a first attempt (the lost ones a second time).
    assert sorted(r["item"] for r in rescued) == sorted(ids)
    assert {r["attempt"] for r in rescued} == {0}
    assert lost <= ids
    # ... as soon as the victim's lease ran out: no redelivery backoff on top. A backoff
    # moves an item's due time past the failure (by at least 3 s); each rescued delivery
    # still carries the due time it was scheduled with, before the kill. (Its wall time is
    # not asserted: on a loaded host the wire server's claims take seconds.)
    moved = [r for r in rescued if r["due"] >= killed_at]
    assert moved == [], f"redelivered with a due time moved past the kill: {moved}"


def test_a_handler_that_kills_its_node_is_dead_lettered_after_two_runs(
    nodes: Nodes, mongo_db: Any
) -> None:
    # Every node's handler kills its process on "kill-*": three nodes, two will die.
    options: dict[str, float | str] = {"lease": LEASE, "poll": POLL, "kill_prefix": "kill-"}
    nodes.start("n1", "n2", "n3", max_attempts=1, **options)
    scheduler = MongoScheduler(mongo_db["timers"], node_id="test")
    scheduler.schedule(ScheduleItem("kill-1", ScheduleKind.TIMER, datetime.now(UTC)))
    dead = mongo_db["timers_dead"]
    # The dead letter is written before the item is deleted (two writes: nothing is lost if
    # the node dies between them), so wait for both.
    wait_until(
        lambda: dead.count_documents({}) == 1 and mongo_db["timers"].count_documents({}) == 0,
        60,
        "the killer to be dead-lettered",
    )

    runs = deliveries(mongo_db)
    # Run, lost with its node; run again, lost again: the third claim counts the second
    # lost run as a failed delivery (DeliveryLost) and does not call the handler.
    assert [r["attempt"] for r in runs] == [0, 0], runs
    assert len({r["node"] for r in runs}) == 2 and len(nodes.alive()) == 1
    (letter,) = dead.find()
    assert (letter["_id"], letter["attempts"]) == ("kill-1", 1)
    assert letter["error"].startswith("DeliveryLost: 2 runs in a row were lost"), letter
    assert mongo_db["timers"].count_documents({}) == 0
    time.sleep(LEASE + POLL)  # and it never runs again
    assert len(deliveries(mongo_db)) == 2
