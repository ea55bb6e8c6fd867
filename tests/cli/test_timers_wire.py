"""Every ``flowsched timers`` verb against the MongoDB-wire server, through ``--uri``/``--db``.

The app runs on the system clock here: items are seeded hours away from now, so that no
assertion depends on how long a step takes.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from timers_kit import ids, rows

from flowsched.port import ScheduleKind

pytestmark = pytest.mark.wire

HOUR = timedelta(hours=1)


def test_list_show_and_stats(wire_namespace, wire_timers):
    ns = wire_namespace
    ns.timer("late-2", -2 * HOUR, flow_id="f-1", payload={"order": "o-2"})
    ns.timer("late-1", -3 * HOUR, flow_id="f-1")
    ns.timer("soon", HOUR, flow_id="f-2")
    ns.timer("later", 2 * HOUR, ScheduleKind.ACTION_TIMEOUT, flow_id="f-1")
    ns.timer("running", -HOUR, ScheduleKind.PROCESSING_TIMEOUT)
    assert ns.claim(ScheduleKind.PROCESSING_TIMEOUT, "node-b", lease=HOUR) == ["running"]

    code, first, _ = wire_timers("list", "--limit", "2")
    assert code == 0
    assert ids(first) == ["late-1", "late-2"]
    assert first.splitlines()[-1] == "showing 1-2 of 5, next: --page 2"
    rest = wire_timers("list", "--limit", "2", "--after", "late-2")[1]
    assert ids(rest) == ["running", "soon"]
    assert rows(rest)[0][5].startswith("node-b until ")
    assert ids(wire_timers("list", "--flow", "f-1", "--kind", "TIMER")[1]) == ["late-1", "late-2"]
    overdue = json.loads(wire_timers("list", "--overdue", "--json")[1])
    assert [timer["id"] for timer in overdue["timers"]] == ["late-1", "late-2"]

    shown = json.loads(wire_timers("show", "late-2", "--json")[1])
    assert (shown["flow_id"], shown["payload"], shown["overdue"]) == ("f-1", {"order": "o-2"}, True)
    assert wire_timers("show", "gone")[0] == 1

    figures = json.loads(wire_timers("stats", "--json")[1])
    assert figures["pending_by_kind"] == {"ACTION_TIMEOUT": 1, "PROCESSING_TIMEOUT": 1, "TIMER": 3}
    assert (figures["overdue"], figures["in_flight"]) == (2, 1)
    assert figures["oldest_overdue"]["id"] == "late-1"
    assert figures["oldest_overdue"]["late_seconds"] >= 3 * 3600


def test_cancel_dead_letters_and_requeue(wire_namespace, wire_timers):
    ns = wire_namespace
    ns.timer("t-1", HOUR)
    ns.dead_letter("pay-1", "RuntimeError: gateway down", died_ago=HOUR, payload={"p": 1})

    assert wire_timers("cancel", "t-1") == (0, "cancelled t-1\n", "")
    assert wire_timers("cancel", "t-1")[0] == 1
    letters = json.loads(wire_timers("dead-letters", "--json")[1])["dead_letters"]
    assert [(d["id"], d["error"]) for d in letters] == [("pay-1", "RuntimeError: gateway down")]

    code, out, _ = wire_timers("requeue", "pay-1", "--at", "2030-01-01T00:00:00Z")
    assert (code, out) == (0, "requeued pay-1: due 2030-01-01T00:00:00.000Z, attempts reset\n")
    shown = json.loads(wire_timers("show", "pay-1", "--json")[1])
    assert (shown["due"], shown["payload"], shown["attempts"]) == (
        "2030-01-01T00:00:00.000Z", {"p": 1}, 0,
    )  # fmt: skip
    assert wire_timers("dead-letters")[1].splitlines()[-1] == "no dead letters"
    assert wire_timers("requeue", "pay-1")[0] == 1


def test_a_wrong_collection_and_bad_credentials_are_one_line(
    mongo_uri, wire_namespace, wire_timers
):
    wire_namespace.timer("t-1", HOUR)

    code, _, err = wire_timers("stats", "--collection", "timer")
    assert code == 2
    assert err.startswith("flowsched: error: no collection ") and err.count("\n") == 1

    with_password = mongo_uri.replace("mongodb://", "mongodb://mallory:pa55word@", 1)
    code, _, err = wire_timers("stats", "--uri", with_password)
    assert code == 2
    assert "mongodb://mallory:***@" in err and "pa55word" not in err
    assert err.count("\n") == 1
