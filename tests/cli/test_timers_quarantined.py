"""``flowsched timers quarantined``: the documents the scheduler moved aside, and why."""

from __future__ import annotations

import json
from datetime import timedelta

from timers_kit import rows

from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleKind


def test_quarantined_documents_are_listed_with_reason_node_and_what_was_kept(
    namespace, timers, clock
):
    collection = namespace.collection
    timer = {"kind": "TIMER", "route": "k:TIMER", "ready_at": clock.now(), "generation": 1}
    collection.insert_one({**timer, "_id": {"odd": 1}, "due": clock.now()})
    collection.insert_one({**timer, "_id": "no-due", "payload": {"order": "o-1"}})
    scheduler = MongoScheduler(collection, node_id="node-a", clock=clock)
    scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    clock.advance(timedelta(seconds=1))
    scheduler.run_due()

    code, out, _ = timers("quarantined")

    assert code == 0
    assert out.splitlines()[0].startswith("quarantined documents in flowsched.timers_quarantine")
    table = {row[0]: row for row in rows(out)}
    assert set(table) == {"{'odd': 1}", "no-due"}
    assert table["no-due"][1:3] == ["due must be a date, got None", "node-a"]
    assert table["no-due"][4] == "whole"
    listed = json.loads(timers("quarantined", "--json")[1])["quarantined"]
    (no_due,) = [r for r in listed if r["item_id"] == "no-due"]
    assert no_due["document"]["payload"] == {"order": "o-1"}  # the original is kept
    assert no_due["reason"] == "due must be a date, got None"


def test_nothing_quarantined_is_an_empty_list(namespace, timers):
    namespace.timer("alive", timedelta(minutes=1))
    code, out, _ = timers("quarantined")
    assert code == 0 and rows(out) == []
