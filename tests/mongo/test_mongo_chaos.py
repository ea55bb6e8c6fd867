"""Chaos on the wire server: good timers among poison documents of every shape (each stored
field removed, of the wrong type, at the numeric extremes; odd ids; 16 MiB of junk), swept
by two nodes. Every good timer is delivered once, every poison document is quarantined -
except those without a usable route, which no node claims and ``timers stats`` reports (a
timer stored before routing waits for ``flowsched timers migrate``) - and no document causes
more than one error in the log (none a failed sweep turn)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
import pytest
from bson import ObjectId

from flowsched.delivery import RedeliveryPolicy
from flowsched.mongo import MongoScheduler
from flowsched.mongo.inspection import collect_stats
from flowsched.mongo.store import TimerStore
from flowsched.port import ScheduleItem, ScheduleKind

pytestmark = [pytest.mark.wire, pytest.mark.slow]

GOOD = 150
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
FIELDS = ("kind", "due", "flow_id", "payload", "generation", "attempts", "deliveries")
FIELDS += ("last_error", "ready_at", "claim", "route")
WRONG: dict[str, Any] = {
    "kind": 5,
    "due": "tomorrow",
    "flow_id": 12,
    "payload": [1, 2],
    "generation": "one",
    "attempts": "none",
    "deliveries": {"n": 1},
    "last_error": 3.5,
    "ready_at": "now",
    "claim": "mine",
    "route": {"k": "TIMER"},
}
EXTREMES: dict[str, list[Any]] = {
    "generation": [INT64_MIN, INT64_MAX, 1.5, float("nan")],
    "attempts": [-1, INT64_MAX, INT64_MIN, 2**31, float("inf")],
    "deliveries": [-1, INT64_MAX, INT64_MIN, 2**31, 1e308, float("nan")],
    "due": [datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59)],
    "ready_at": [datetime(1, 1, 1)],
}
# Shapes that are not poison: optional fields, or values still in range. These are timers
# (odd ones) and must be delivered like any other.
USABLE = {
    "no-flow_id",
    "no-payload",
    "no-last_error",
    "no-claim",
    "no-deliveries",
    "no-attempts",
    "wrong-last_error",
    "wrong-claim",
    "extreme-generation-0",
    "extreme-generation-1",
    "extreme-due-0",
    "extreme-due-1",
    "extreme-ready_at-0",
}


# Not claimable by anyone, not poison either: reported as route-less by `timers stats`.
UNROUTED = {"no-route", "wrong-route"}


def base(now: datetime, item_id: Any) -> dict[str, Any]:
    return {
        "_id": item_id,
        "kind": "TIMER",
        "route": "k:TIMER",
        "due": now,
        "flow_id": None,
        "payload": None,
        "generation": 7,
        "attempts": 0,
        "deliveries": 0,
        "last_error": None,
        "ready_at": now,
        "claim": None,
    }


def poison_documents(now: datetime) -> dict[str, dict[str, Any]]:
    """Name -> document; the name is the string ``_id`` where the shape keeps one."""
    docs: dict[str, dict[str, Any]] = {}
    for name in FIELDS:
        doc = base(now, f"no-{name}")
        del doc[name]
        docs[f"no-{name}"] = doc
        docs[f"wrong-{name}"] = {**base(now, f"wrong-{name}"), name: WRONG[name]}
    for name, values in EXTREMES.items():
        for n, value in enumerate(values):
            key = f"extreme-{name}-{n}"
            docs[key] = {**base(now, key), name: value}
    docs["no-_id"] = {k: v for k, v in base(now, None).items() if k != "_id"}
    docs["subdocument-_id"] = base(now, {"id": "sub"})
    docs["number-_id"] = base(now, 42)
    docs["objectid-_id"] = base(now, ObjectId())
    docs["long-_id"] = base(now, "x" * 5000)
    docs["bad-recurrence"] = {**base(now, "bad-recurrence"), "recurrence": {"every": 5}}
    fat = base(now, "fat")
    fat["blob"] = ""
    fat["blob"] = "x" * (16 * 1024 * 1024 - 20 - len(bson.encode(fat)))
    docs["fat"] = fat
    return docs


def test_two_nodes_deliver_every_good_timer_once_and_quarantine_every_poison_document(
    mongo_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    timers = mongo_db["timers"]
    now = datetime.now(UTC)
    fired: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(item: ScheduleItem, attempt: int) -> None:
        with lock:
            fired[item.id] += 1

    caplog.set_level(logging.WARNING, logger="flowsched")
    nodes = [
        MongoScheduler(
            timers,
            node_id=f"chaos-{n}",
            poll_interval=timedelta(milliseconds=200),
            batch_size=10,  # poison and good timers share batches
            redelivery=RedeliveryPolicy(initial=timedelta(milliseconds=200)),
        )
        for n in range(2)
    ]
    poison = poison_documents(now - timedelta(seconds=1))  # oldest: met first by every claim
    for doc in poison.values():
        timers.insert_one(doc)
    good = {f"good-{n:03}" for n in range(GOOD)}
    for n, item_id in enumerate(sorted(good)):
        due = now + timedelta(milliseconds=10 * n)
        nodes[n % 2].schedule(ScheduleItem(item_id, ScheduleKind.TIMER, due))
    for node in nodes:
        node.subscribe(ScheduleKind.TIMER, handler)
        node.start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with lock:
                done = good <= set(fired) and set(fired) >= USABLE
            if done and timers.count_documents({}) == len(UNROUTED):
                break
            time.sleep(0.2)
    finally:
        for node in nodes:
            node.close()

    assert {item_id: n for item_id, n in fired.items() if n != 1} == {}
    assert good <= set(fired)
    assert set(fired) - good == USABLE
    left = {doc["_id"] for doc in timers.find({}, {"_id": 1}) if isinstance(doc["_id"], str)}
    assert left == UNROUTED and timers.count_documents({}) == len(UNROUTED)
    routes = collect_stats(TimerStore(timers), datetime.now(UTC)).routes
    assert [(r.route, r.pending) for r in routes] == [(None, len(UNROUTED))]
    records = list(mongo_db["timers_quarantine"].find({}, {"document": 0}))
    assert len(records) == len(poison) - len(USABLE) - len(UNROUTED)
    assert all(record["reason"] for record in records)

    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [r for r in errors if "sweeper" in r.getMessage()], "a sweep turn failed"
    per_document = Counter(r.getMessage().split(":")[0] for r in errors)
    assert len(errors) == len(records), [r.getMessage()[:200] for r in errors]
    assert max(per_document.values(), default=0) <= 1
