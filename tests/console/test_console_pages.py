"""The console's pages over a MongoDB namespace (mongomock) and over an in-memory scheduler."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from console_kit import START, TOKEN, dead_letter, sign_in, timer

from flowsched.clock import ManualClock
from flowsched.memory import InMemoryScheduler
from flowsched.port import ScheduleItem, ScheduleKind


def ids(html: str) -> list[str]:
    return re.findall(r'class="timer-link" href="[^"]*">([^<]+)</a>', html)


def next_link(html: str) -> str | None:
    found = re.search(r'href="([^"]+)" id="next-page"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def walk(client: Any, url: str) -> list[str]:
    seen: list[str] = []
    while url:
        page = client.get(url)
        assert page.status_code == 200, page.text
        seen += ids(page.text)
        url = next_link(page.text) or ""
    return seen


def test_every_page_answers(client: Any) -> None:
    console = client()
    for url in ["/", "/overview/live", "/timers", "/timer?id=t-00001", "/dead", "/quarantine",
                "/nodes"]:  # fmt: skip
        assert console.get(url).status_code == 200, url


def test_pages_walk_every_timer_once_in_id_order(client: Any) -> None:
    seen = walk(client(), "/timers?limit=25")
    assert seen == [f"t-{n:05d}" for n in range(120)]


def test_next_link_is_a_keyset_cursor_not_an_offset(client: Any) -> None:
    html = client().get("/timers?limit=10").text
    query = parse_qs(urlparse(next_link(html) or "").query)
    assert "after" in query and "skip" not in query and "page" not in query


def test_flow_prefix_pages_in_flow_then_id_order(client: Any) -> None:
    seen = walk(client(), "/timers?flow=flow-3&limit=5")
    assert seen == sorted((f"t-{n:05d}" for n in range(120) if n % 7 == 3), key=lambda i: i)


def test_filters_combine(client: Any) -> None:
    console = client()
    assert ids(console.get("/timers?id=t-0001").text) == [f"t-{n:05d}" for n in range(10, 20)]
    assert set(walk(console, "/timers?handler=alpha")) == {f"t-{n:05d}" for n in range(1, 120, 2)}
    late = START + timedelta(minutes=100)
    due = walk(console, "/timers?" + urlencode({"due_from": late.isoformat()}))
    assert due == [f"t-{n:05d}" for n in range(100, 120)]
    assert ids(console.get("/timers?kind=action_timeout").text) == []


def test_state_filter_uses_the_clock(seeded: Any, client: Any, clock: ManualClock) -> None:
    clock.advance(timedelta(minutes=5, seconds=30))  # t-0 .. t-5 are due
    assert walk(client(), "/timers?state=overdue") == [f"t-{n:05d}" for n in range(6)]


def test_timer_page_shows_fields_payload_and_error(seeded: Any, client: Any) -> None:
    seeded.timers.update_one({"_id": "t-00003"}, {"$set": {"attempts": 2, "deliveries": 2,
                             "last_error": "ValueError: bad"}})  # fmt: skip
    html = client().get("/timer?id=t-00003").text
    for text in ["t-00003", "alpha", "flow-3", "2 failed", "ValueError: bad", "&#34;n&#34;: 3"]:
        assert text in html, text


def test_missing_timer_is_404_and_dead_letter_says_so(client: Any) -> None:
    console = client()
    assert console.get("/timer?id=nope").status_code == 404
    dead = console.get("/timer?id=d-1")
    assert dead.status_code == 200 and "dead letter" in dead.text and "boom" in dead.text


def test_overview_charts_the_next_24_hours(client: Any, clock: ManualClock) -> None:
    html = client().get("/").text
    assert "120 due in the next 24 h (peak 60 per hour)" in html
    assert 'src="/static/live.js"' in html and 'id="live"' in html
    assert "failures" in html.lower() and "1 dead letters" in html
    assert client().get("/static/live.js").status_code == 200


def test_overview_lists_routes_no_live_node_serves(seeded: Any, client: Any) -> None:
    seeded.timers_nodes.insert_one({"_id": "n1", "routes": ["h:alpha"], "renewed_at": START,
                                    "expires_at": START + timedelta(seconds=30)})  # fmt: skip
    html = client().get("/").text
    unserved = html[html.index('id="unserved"') :]
    assert "k:TIMER" in unserved and "h:alpha" not in unserved
    nodes = client().get("/nodes").text
    assert "n1" in nodes and "live" in nodes


def test_lateness_counts_undelivered_items_of_the_last_hour(
    client: Any, clock: ManualClock
) -> None:
    clock.advance(timedelta(minutes=30, seconds=1))
    assert "31 late from the last hour" in client().get("/").text


def test_dead_letters_and_quarantine_pages(seeded: Any, client: Any) -> None:
    seeded.timers_quarantine.insert_one({"_id": "q1", "item_id": "bad", "document": {"_id": "bad"},
                                         "reason": "kind 7 is not one of", "node": "n1",
                                         "quarantined_at": START})  # fmt: skip
    console = client()
    dead = console.get("/dead").text
    assert "boom" in dead
    assert "<td>alpha</td>" in dead  # the handler the dead letter was for (it showed "-")
    assert "kind 7 is not one of" in console.get("/quarantine").text


def test_dead_letters_page_by_keyset(db: Any, client: Any) -> None:
    db.timers_dead.insert_many([dead_letter(f"d-{n:03d}", generation=n + 1) for n in range(7)])
    html = client(target=db).get("/dead?limit=3").text
    seen = []
    url: str | None = "/dead?limit=3"
    while url:
        html = client(target=db).get(url).text
        seen += re.findall(r'href="/timer\?id=(d-\d+)"', html)
        url = next_link(html)
    assert seen == [f"d-{n:03d}" for n in range(7)] + ["d-1"]  # the seeded one sorts last


def test_over_an_in_memory_scheduler(clock: ManualClock, client: Any) -> None:
    scheduler = InMemoryScheduler(clock=clock)
    scheduler.schedule(ScheduleItem("m-1", ScheduleKind.TIMER, START + timedelta(hours=1)))
    console = client(TOKEN, target=scheduler)
    sign_in(console)
    assert "m-1" in console.get("/timer?id=m-1").text
    for url in ["/quarantine", "/nodes"]:
        page = console.get(url)
        assert page.status_code == 200 and "needs MongoDB" in page.text, url
    for url in ["/", "/timers", "/dead"]:
        page = console.get(url)
        assert page.status_code == 200 and "needs MongoDB" not in page.text, url
    assert "timer?id=m-1" in console.get("/timers").text


def test_importing_flowsched_imports_no_web_framework() -> None:
    code = (
        "import sys, flowsched; "
        "print([m for m in ('starlette', 'jinja2', 'uvicorn') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_malformed_document_is_listed_not_an_error(seeded: Any, client: Any) -> None:
    seeded.timers.insert_one({**timer(500), "kind": "NOPE"})
    console = client()
    assert "malformed" in console.get("/timers?id=t-00500").text
    assert console.get("/timer?id=t-00500").status_code == 200


@pytest.mark.parametrize("limit", [1, 4, 10, 50])
def test_flow_pages_are_complete_and_ordered_whatever_the_flow_sizes(
    db: Any, client: Any, limit: int
) -> None:
    sizes = {"ord-a": 1, "ord-b": 3, "ord-c": 23, "ord-d": 2, "ord-e": 7, "other": 5}
    documents = [
        timer(n, id=f"x-{(n * 7919) % 1000:03d}-{flow}", flow_id=flow)
        for flow, size in sizes.items()
        for n in range(size)
    ]
    db.timers.insert_many(sorted(documents, key=lambda d: d["_id"], reverse=True))
    seen = walk(client(target=db), f"/timers?flow=ord-&limit={limit}")
    expected = sorted((d["due"], d["_id"]) for d in documents if d["flow_id"] != "other")
    assert seen == [item_id for _, item_id in expected]  # soonest due first


def test_pages_continue_after_ids_that_are_not_text(db: Any, client: Any) -> None:
    from bson import ObjectId

    records = [{"_id": ObjectId(), "item_id": n, "reason": f"r{n}"} for n in range(5)]
    db.timers_quarantine.insert_many(records)
    db.timers.insert_many([{**timer(n), "_id": n} for n in range(3)])  # malformed: int ids
    console = client(target=db)
    url: str | None = "/quarantine?limit=2"
    reasons: list[str] = []
    while url:
        html = console.get(url).text
        reasons += re.findall(r"<td>(r\d)</td>", html)
        url = next_link(html)
    assert reasons == [f"r{n}" for n in range(5)]
    first = console.get("/timers?limit=2").text
    assert console.get(next_link(first) or "").status_code == 200
