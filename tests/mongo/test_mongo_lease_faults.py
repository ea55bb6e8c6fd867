"""Faults past the lease, on real processes and the wire server (issue 20): a node paused
longer than its lease runs none of the claims it lost, a run that completes after its lease
is no failure, and a node whose clock is minutes off fires nothing early.

Each node is ``python -m tests.mongo.node``; its handler records every delivery in the
``deliveries`` collection as ``{item, node, attempt, generation, at, due}`` (``at`` and
``due`` on the true clock, whatever clock the node's scheduler runs on).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mongo_nodes import Nodes, all_done, deliveries, schedule_spread, wait_until

from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

pytestmark = [pytest.mark.wire, pytest.mark.slow]

LEASE = 4.0


def test_a_node_paused_past_its_lease_runs_none_of_the_claims_it_lost(
    nodes: Nodes, mongo_db: Any
) -> None:
    scheduler = MongoScheduler(mongo_db["timers"], node_id="test")
    now = datetime.now(UTC)
    ids = [f"t-{n:02}" for n in range(42)]
    for item_id in ids:
        scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, now))
    # Eight slow workers: node a claims a batch and starts eight (each start recorded,
    # claim.at), the rest queued unstarted: they start only once a confirm finds them held.
    nodes.start("a", lease=LEASE, workers=8, handler_seconds=5.0)
    wait_until(lambda: len(deliveries(mongo_db)) >= 8, 30, "node a to start eight handlers")
    nodes.pause("a")
    in_flight = {r["item"] for r in deliveries(mongo_db)}
    held = mongo_db["timers"].count_documents({"claim.owner": "a", "claim.at": {"$type": "date"}})
    assert len(in_flight) == 8 and held == 8, (in_flight, held)

    # Replaced while a holds the claims of their old generation (running), or before any
    # node could claim them: only the new one may run from now on.
    waiting = [i for i in ids if i not in in_flight]
    replaced = sorted(in_flight)[:4] + waiting[:6]
    old = {i: scheduler.get(i).generation for i in replaced}  # type: ignore[union-attr]
    replaced_at = time.time()
    for item_id in replaced:
        scheduler.schedule(ScheduleItem(item_id, ScheduleKind.TIMER, datetime.now(UTC)))
    nodes.start("b", lease=LEASE)
    # b runs everything, a's lost claims once their lease ended; only then a resumes, so
    # whatever a starts after it resumes is a run of a claim it lost.
    wait_until(lambda: all_done(mongo_db, set(ids)), 60, "b to deliver every item")
    nodes.resume("a")
    resumed_at = time.time()
    time.sleep(3.0)  # a's turn: its handlers finish late (their settles are stale)
    nodes.stop()

    records = deliveries(mongo_db)
    by_a = [r for r in records if r["node"] == "a"]
    assert [r for r in by_a if r["at"] >= resumed_at] == []  # nothing started after resume
    assert {r["item"] for r in by_a} == in_flight
    runs = Counter((r["item"], r["generation"]) for r in records)
    twice = {item for (item, _), count in runs.items() if count > 1}
    assert twice <= in_flight  # only the runs in flight at the pause ran twice
    assert {r["item"] for r in records} == set(ids)
    stale = [r for r in records if r["item"] in old and r["generation"] == old[r["item"]]]
    assert [r for r in stale if r["at"] >= replaced_at] == []  # no replaced generation ran
    assert {(r["item"]) for r in records if r["item"] in old} == set(replaced)
    # a's late settles changed nothing: nothing left, nothing dead, nothing run again.
    assert mongo_db["timers"].count_documents({}) == 0
    assert mongo_db["timers_dead"].count_documents({}) == 0


def test_runs_that_succeed_after_their_lease_ended_never_dead_letter_the_item(
    nodes: Nodes, mongo_db: Any
) -> None:
    # The handler returns normally, but holds the GIL for 6 s (a blocking C call): its
    # node cannot renew the 3 s lease, so the other node takes the item over meanwhile.
    nodes.start("a", "b", lease=3.0, gil_seconds=6, max_attempts=2, redelivery=0.3)
    scheduler = MongoScheduler(mongo_db["timers"], node_id="test")
    scheduler.schedule(
        ScheduleItem("gil", ScheduleKind.TIMER, datetime.now(UTC) + timedelta(seconds=0.5))
    )
    wait_until(lambda: mongo_db["timers"].count_documents({}) == 0, 60, "the item to settle")
    time.sleep(7.0)  # any run still holding a GIL finishes and settles (late)
    runs = deliveries(mongo_db)

    assert mongo_db["timers_dead"].count_documents({}) == 0, runs
    assert mongo_db["timers"].count_documents({}) == 0  # completed, not brought back
    assert len(runs) >= 2  # the lease was lost: the other node ran it too
    assert all(r["attempt"] == 0 for r in runs), runs  # no run counted as failed


@pytest.mark.parametrize("skew", [120.0, -120.0], ids=["ahead-2min", "behind-2min"])
def test_a_node_minutes_off_fires_nothing_early_and_loses_nothing(
    nodes: Nodes, mongo_db: Any, skew: float
) -> None:
    poll = 0.2
    nodes.start("skewed", clock_offset=skew, lease=10.0, poll=poll)
    nodes.start("true", lease=10.0, poll=poll)
    ids = schedule_spread(mongo_db, 1000, timedelta(seconds=2), timedelta(seconds=20))
    wait_until(lambda: all_done(mongo_db, ids), 90, "1,000 items to be delivered")
    heartbeat = mongo_db["timers_nodes"].find_one({"_id": "skewed"})
    nodes.stop()

    records = deliveries(mongo_db)
    per_item = Counter(r["item"] for r in records)
    assert set(per_item) == ids  # 0 lost
    assert [item for item, count in per_item.items() if count > 1] == []  # 0 duplicates
    earliest = max(r["due"] - r["at"] for r in records)
    assert earliest <= poll + 1.0, f"a delivery fired {earliest:.2f}s before its due time"
    # The node learnt its offset from the server (the database's clock minus its own).
    assert heartbeat is not None
    assert abs(heartbeat["clock_offset_ms"] / 1000 + skew) < 1.0, heartbeat
    served = Counter(r["node"] for r in records)
    print(f"skew {skew:+.0f}s: served {dict(served)}, earliest {earliest:+.3f}s before due")
