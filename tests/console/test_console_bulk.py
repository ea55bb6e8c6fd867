"""Bulk actions: cancel by filter, cancel a flow, requeue a handler's dead letters. Each
previews its count on its own page, asks to confirm there, runs in batches, is audited once
with its ids, and leads back to the list it came from."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from console_kit import START, USERS, csrf_of, dead_letter, sign_in
from starlette.testclient import TestClient

from flowsched.clock import ManualClock
from flowsched.console import app, bulk
from flowsched.memory import InMemoryScheduler
from flowsched.port import ScheduleItem, ScheduleKind


def confirm_form(page: str) -> dict[str, str]:
    """The hidden fields of a preview page's confirm form."""
    form = page[page.index('id="confirm"') :]
    form = form[: form.index("</form>")]
    return {
        unescape(n): unescape(v) for n, v in re.findall(r'name="([^"]+)" value="([^"]*)"', form)
    }


def preview_count(page: str) -> int:
    found = re.search(r'id="preview-count">(\d+)<', page)
    assert found, page
    return int(found.group(1))


@pytest.fixture
def operator(client: Any) -> TestClient:
    console: TestClient = client(users=USERS)
    sign_in(console, "alice")
    return console


def test_cancel_by_filter_previews_confirms_runs_in_batches_and_is_audited(
    seeded: Any, operator: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH", 7)
    listing = operator.get("/timers?handler=alpha").text
    assert re.search(r'id="count">60<', listing)
    link = unescape(re.search(r'id="bulk-cancel" href="([^"]+)"', listing).group(1))  # type: ignore[union-attr]
    preview = operator.get(link).text
    assert preview_count(preview) == 60 and seeded.timers.count_documents({}) == 120
    done = operator.post("/bulk/cancel", data=confirm_form(preview))
    assert done.status_code == 200
    assert seeded.timers.count_documents({"handler": "alpha"}) == 0
    assert seeded.timers.count_documents({}) == 60
    assert done.text.count('class="batch"') == 9  # 60 in batches of 7
    assert 'id="bulk-done">60 done<' in done.text
    assert 'href="/timers?handler=alpha"' in done.text  # back to the list it came from
    entries = list(seeded.timers_audit.find({"action": "bulk_cancel"}))
    assert len(entries) == 1 and entries[0]["who"] == "alice" and entries[0]["count"] == 60
    assert sorted(entries[0]["ids"]) == [f"t-{n:05d}" for n in range(1, 120, 2)]


def test_cancel_a_flow(seeded: Any, operator: TestClient) -> None:
    preview = operator.get("/bulk/cancel-flow?flow=flow-3&back=%2Ftimers%3Fflow%3Dflow-").text
    expected = seeded.timers.count_documents({"flow_id": "flow-3"})
    assert preview_count(preview) == expected > 0
    done = operator.post("/bulk/cancel-flow", data=confirm_form(preview))
    assert seeded.timers.count_documents({"flow_id": "flow-3"}) == 0
    assert seeded.timers.count_documents({}) == 120 - expected
    assert 'href="/timers?flow=flow-"' in done.text
    entry = seeded.timers_audit.find_one({"action": "bulk_cancel_flow"})
    assert entry["count"] == expected and "flow flow-3" in entry["what"]


def test_requeue_a_handlers_dead_letters(seeded: Any, operator: TestClient) -> None:
    seeded.timers_dead.insert_many([dead_letter(f"dl-{n:02d}") for n in range(30)])
    seeded.timers.insert_one({**seeded.timers.find_one({"_id": "t-00000"}), "_id": "dl-07"})
    page = operator.get("/dead").text
    assert "Requeue all 31" in page
    preview = operator.get("/bulk/requeue?handler=alpha&back=%2Fdead").text
    assert preview_count(preview) == 31
    done = operator.post("/bulk/requeue", data=confirm_form(preview))
    assert "30 done, 1 left as they were" in done.text  # dl-07 is scheduled again already
    assert [d["_id"] for d in seeded.timers_dead.find({})] == ["dl-07"]
    requeued = seeded.timers.find_one({"_id": "dl-12"})
    assert requeued["attempts"] == 0 and requeued["route"] == "h:alpha"
    entry = seeded.timers_audit.find_one({"action": "bulk_requeue"})
    assert entry["count"] == 30 and "dl-07" not in entry["ids"] and "d-1" in entry["ids"]


def test_a_viewer_may_preview_but_not_run(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "vera")
    preview = console.get("/bulk/cancel?handler=alpha").text
    assert preview_count(preview) == 60 and 'id="confirm"' not in preview
    csrf = csrf_of(console.get("/timers").text)
    refused = console.post("/bulk/cancel", data={"csrf": csrf, "handler": "alpha"})
    assert refused.status_code == 403 and seeded.timers.count_documents({}) == 120
    entry = seeded.timers_audit.find_one({"action": "cancel", "done": False})
    assert entry["who"] == "vera" and "role" in entry["outcome"]


def test_back_goes_only_to_this_consoles_lists(operator: TestClient) -> None:
    for back in ["https://evil.example/", "//evil.example/timers", "/login", "/timers\\x"]:
        assert operator.get("/bulk/cancel", params={"back": back}).status_code == 400, back


def test_bulk_over_an_in_memory_scheduler(clock: ManualClock) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    for n in range(12):
        due = START + timedelta(minutes=n)
        scheduler.schedule(ScheduleItem(f"m-{n}", ScheduleKind.TIMER, due, f"f-{n % 3}"))
    with TestClient(app(scheduler, users=USERS, clock=clock)) as console:
        sign_in(console, "bob")
        preview = console.get("/bulk/cancel-flow?flow=f-1").text
        assert preview_count(preview) == 4
        console.post("/bulk/cancel-flow", data=confirm_form(preview))
        assert sorted(i.id for i in scheduler.scheduled()) == sorted(
            f"m-{n}" for n in range(12) if n % 3 != 1
        )
        preview = console.get("/bulk/cancel?due_from=2026-03-01T12:05:00Z").text
        console.post("/bulk/cancel", data=confirm_form(preview))
        assert sorted(i.id for i in scheduler.scheduled()) == ["m-0", "m-2", "m-3"]
        audit = console.get("/audit?action=bulk_cancel").text
        assert "bob" in audit and "5 ids" in audit


def test_batches_are_flat_filters_where_the_fields_differ() -> None:
    ids = {"_id": {"$in": ["a", "b"]}}
    assert bulk.merged({"handler": "h"}, ids) == {"_id": {"$in": ["a", "b"]}, "handler": "h"}
    both = {"$and": [{"handler": "h"}, {"kind": "TIMER"}]}
    assert bulk.merged(both, ids) == {**ids, "handler": "h", "kind": "TIMER"}
    prefix = {"_id": {"$gte": "t-", "$lt": "t-\U0010ffff"}}
    assert bulk.merged(prefix, ids) == {"$and": [prefix, ids]}
    assert bulk.merged({}, ids) == ids
    span = {"_id": {"$gte": "t-1", "$lte": "t-9"}}
    assert bulk.merged(prefix, span, replace_id=True) == span  # the batch lies in the prefix


def test_a_timer_that_stopped_matching_is_not_cancelled(seeded: Any, operator: TestClient) -> None:
    preview = operator.get("/bulk/cancel?handler=alpha").text
    seeded.timers.update_one({"_id": "t-00003"}, {"$set": {"handler": "beta"}})
    operator.post("/bulk/cancel", data=confirm_form(preview))
    assert seeded.timers.find_one({"_id": "t-00003"}) is not None
    assert seeded.timers.count_documents({"handler": "alpha"}) == 0


def test_cancel_by_id_prefix_in_small_batches(
    seeded: Any, operator: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH", 3)
    preview = operator.get("/bulk/cancel?id=t-0001&kind=TIMER").text
    assert preview_count(preview) == 10
    done = operator.post("/bulk/cancel", data=confirm_form(preview))
    assert 'id="bulk-done">10 done<' in done.text
    assert seeded.timers.count_documents({}) == 110
    assert seeded.timers.count_documents({"_id": {"$regex": "^t-0001"}}) == 0
