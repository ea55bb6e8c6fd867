"""``flowsched timers stats``: what is pending, late, running, dead and quarantined."""

from __future__ import annotations

import json
from datetime import timedelta

from flowsched.port import ScheduleKind

MIN = timedelta(minutes=1)


def seed(namespace, clock) -> None:
    """2 TIMERs overdue (one 90 min), 1 due later, 1 ACTION_TIMEOUT running on node-b,
    1 PROCESSING_TIMEOUT whose claimer died, 2 dead letters, 1 quarantined document."""
    namespace.timer("late-1", -90 * MIN)
    namespace.timer("late-2", -5 * MIN)
    namespace.timer("later", 30 * MIN)
    namespace.timer("running", -MIN, ScheduleKind.ACTION_TIMEOUT)
    namespace.timer("orphan", -2 * MIN, ScheduleKind.PROCESSING_TIMEOUT)
    namespace.claim(ScheduleKind.PROCESSING_TIMEOUT, "node-c", lease=MIN)
    clock.advance(2 * MIN)
    namespace.claim(ScheduleKind.ACTION_TIMEOUT, "node-b", lease=10 * MIN)
    namespace.dead_letter("d-1", "boom", died_ago=MIN)
    namespace.dead_letter("d-2", "boom", died_ago=MIN)
    namespace.store.put_quarantined([{"_id": "q-1", "item_id": "bad", "reason": "kind"}])


def test_stats_counts_each_state(namespace, clock, timers):
    seed(namespace, clock)

    code, out, err = timers("stats")

    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "flowsched.timers at mongodb://localhost:27017, 2026-03-01T12:02:00.000Z",
        "pending       5  (ACTION_TIMEOUT 1, PROCESSING_TIMEOUT 1, TIMER 3)",
        "overdue       3  (oldest: late-1, due 2026-03-01T10:30:00.000Z, 1h 32m late)",
        "in flight     1",
        "stale claims  1  (lease ran out: redelivered soon)",
        "dead letters  2",
        "quarantined   1",
        "by route      (pending, oldest due, live nodes serving it)",
        "  kind ACTION_TIMEOUT           1  2026-03-01T11:59:00.000Z  NONE: no live node serves it",
        "  kind PROCESSING_TIMEOUT       1  2026-03-01T11:58:00.000Z  NONE: no live node serves it",
        "  kind TIMER                    3  2026-03-01T10:30:00.000Z  NONE: no live node serves it",
        "live nodes    0",
        "unserved      3 route(s) with pending items and no live node",
    ]


def test_stats_as_json(namespace, clock, timers):
    seed(namespace, clock)

    code, out, _ = timers("stats", "--json")

    assert code == 0
    assert json.loads(out) == {
        "now": "2026-03-01T12:02:00.000Z",
        "pending": 5,
        "pending_by_kind": {"ACTION_TIMEOUT": 1, "PROCESSING_TIMEOUT": 1, "TIMER": 3},
        "overdue": 3,
        "oldest_overdue": {
            "id": "late-1",
            "due": "2026-03-01T10:30:00.000Z",
            "late_seconds": 92 * 60.0,
        },
        "in_flight": 1,
        "stale_claims": 1,
        "dead_letters": 2,
        "quarantined": 1,
        "routes": [
            {
                "route": f"k:{kind}",
                "handler": None,
                "kind": kind,
                "pending": pending,
                "oldest_due": oldest,
                "served_by": [],
            }
            for kind, pending, oldest in [
                ("ACTION_TIMEOUT", 1, "2026-03-01T11:59:00.000Z"),
                ("PROCESSING_TIMEOUT", 1, "2026-03-01T11:58:00.000Z"),
                ("TIMER", 3, "2026-03-01T10:30:00.000Z"),
            ]
        ],
        "unserved_routes": ["k:ACTION_TIMEOUT", "k:PROCESSING_TIMEOUT", "k:TIMER"],
        "nodes": [],
    }


def test_stats_of_a_quiet_namespace(namespace, timers):
    namespace.timer("later", 30 * MIN)

    assert timers("stats")[1].splitlines()[1:] == [
        "pending       1  (TIMER 1)",
        "overdue       0",
        "in flight     0",
        "dead letters  0",
        "quarantined   0",
        "by route      (pending, oldest due, live nodes serving it)",
        "  kind TIMER       1  2026-03-01T12:30:00.000Z  NONE: no live node serves it",
        "live nodes    0",
        "unserved      1 route(s) with pending items and no live node",
    ]
