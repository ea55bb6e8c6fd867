"""An operator's questions: due order with a count and paging both ways, a lapsed node's claim
delivered again now, dead nodes still listed, charts with time axes and links, human units."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from typing import Any

from console_kit import START, USERS, csrf_of, sign_in

from flowsched.clock import ManualClock
from flowsched.console.views import chart, human


def ids(html: str) -> list[str]:
    return re.findall(r'class="timer-link" href="/timer\?id=([^"]+)"', html)


def link(html: str, name: str) -> str | None:
    found = re.search(rf'href="(/timers\?[^"]+)" id="{name}"', html)
    return unescape(found.group(1)) if found else None


def test_lists_page_both_ways_in_due_order_with_a_count(seeded: Any, client: Any) -> None:
    seeded.timers.update_one({"_id": "t-00100"}, {"$set": {"due": START - timedelta(hours=1)}})
    console = client()
    first = console.get("/timers?limit=40").text
    assert re.search(r'id="count">120<', first) and ids(first)[:2] == ["t-00100", "t-00000"]
    assert link(first, "previous-page") is None
    second = console.get(link(first, "next-page") or "").text
    third = console.get(link(second, "next-page") or "").text
    assert link(third, "next-page") is None and len(ids(third)) == 40
    back = console.get(link(third, "previous-page") or "").text
    assert ids(back) == ids(second)
    again = console.get(link(back, "previous-page") or "").text
    assert ids(again) == ids(first) and link(again, "previous-page") is None
    assert re.search(r'id="count">60<', console.get("/timers?handler=alpha").text)


def test_a_claim_of_a_lapsed_node_is_delivered_again_now(
    seeded: Any, client: Any, clock: ManualClock
) -> None:
    lease = START + timedelta(minutes=30)
    claim = {"owner": "node-gone", "token": "tok-1", "lease_until": lease}
    seeded.timers.update_one({"_id": "t-00005"}, {"$set": {"claim": claim, "ready_at": lease}})
    seeded.timers.update_one({"_id": "t-00006"}, {"$set": {"claim": {**claim, "owner": "node-ok"},
                                                           "ready_at": lease}})  # fmt: skip
    seeded.timers_nodes.insert_one({"_id": "node-ok", "routes": [], "renewed_at": START,
                                    "expires_at": START + timedelta(minutes=5)})  # fmt: skip
    console = client(users=USERS)
    sign_in(console, "alice")
    alive = console.get("/timer?id=t-00006").text
    assert 'id="redeliver"' not in alive
    page = console.get("/timer?id=t-00005").text
    assert 'id="lapsed"' in page and 'id="redeliver"' in page
    data = {"csrf": csrf_of(page), "id": "t-00005", "generation": "6"}
    assert console.post("/timer/redeliver", data=data).status_code == 200
    moved = seeded.timers.find_one({"_id": "t-00005"})
    assert moved["ready_at"] == clock.now() and moved["claim"]["lease_until"] == clock.now()
    console.post("/timer/redeliver", data={**data, "id": "t-00006", "generation": "7"})
    kept = seeded.timers.find_one({"_id": "t-00006"})
    assert kept["ready_at"] == lease  # its node is alive: nothing moved, the refusal recorded
    outcomes = [e["outcome"] for e in seeded.timers_audit.find({"action": "redeliver"})]
    assert "node-gone" in outcomes[0] and "is alive" in outcomes[1]
    nodes = console.get("/nodes").text
    assert "node-gone" in nodes and "gone" in nodes  # no heartbeat, but it holds a claim


def test_a_node_seen_stays_listed_after_its_heartbeat_went(
    seeded: Any, client: Any, clock: ManualClock
) -> None:
    seeded.timers_nodes.insert_one({"_id": "node-b", "routes": ["h:alpha"], "renewed_at": START,
                                    "expires_at": START + timedelta(seconds=30)})  # fmt: skip
    console = client()
    assert "node-b" in console.get("/nodes").text
    seeded.timers_nodes.delete_one({"_id": "node-b"})  # the TTL index removed it
    clock.advance(timedelta(hours=1))
    assert "node-b" in console.get("/nodes").text
    clock.advance(timedelta(days=1))
    assert "node-b" not in console.get("/nodes").text


def test_durations_read_in_human_units(seeded: Any, client: Any, clock: ManualClock) -> None:
    assert [human(timedelta(microseconds=506190)), human(3.2), human(42), human(200),
            human(timedelta(hours=2, minutes=5)), human(timedelta(days=3, hours=4))] == [
        "506 ms", "3.2 s", "42 s", "3 min", "2 h 5 min", "3 d 4 h"]  # fmt: skip
    clock.advance(timedelta(minutes=3, seconds=20))
    page = client().get("/timer?id=t-00000").text
    assert "(3 min late)" in page and "us late" not in page


def test_charts_have_wide_bars_a_time_axis_and_links(client: Any) -> None:
    starts = [START + timedelta(minutes=n) for n in range(1440)]
    drawn = chart(starts, {starts[30]: 4}, 0, timedelta(minutes=10))
    assert len(drawn.bars) == 144 and drawn.bars[3].count == 4 and drawn.total == 4
    assert drawn.bars[3].due_from == "2026-03-01T12:30:00+00:00" and len(drawn.ticks) >= 5
    html = client().get("/?per=minute").text
    assert 'class="axis"' in html and "/timers?due_from=2026-03-01T12%3A00%3A00%2B00%3A00" in html
    assert html.count('class="bar"') <= 200


def test_the_audit_page_lists_and_filters(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "alice")
    sign_in(console, "bob")
    everything = console.get("/audit").text
    assert everything.count("sign_in") >= 2
    only = console.get("/audit?who=alice").text
    assert "alice" in only and ">bob<" not in only
    assert console.get("/audit?outcome=maybe").status_code == 400


class _Forgetful:
    """A scheduler with the console's calls but no ``history()`` (an adapter that keeps none)."""

    def __init__(self, inner: Any) -> None:
        self.get, self.scheduled, self.cancel = inner.get, inner.scheduled, inner.cancel
        self.dead_letters, self.requeue = inner.dead_letters, inner.requeue


def test_a_timers_attempts_show_when_the_scheduler_keeps_them(clock: ManualClock) -> None:
    from starlette.testclient import TestClient

    from flowsched.console import app
    from flowsched.history import local_node
    from flowsched.memory import InMemoryScheduler
    from flowsched.port import ScheduleItem, ScheduleKind

    def refuse(item: ScheduleItem, attempt: int) -> None:
        raise TimeoutError("gateway")

    scheduler = InMemoryScheduler(clock=clock)
    scheduler.register("pay", refuse)
    scheduler.schedule(ScheduleItem("h-1", ScheduleKind.TIMER, START, handler="pay"))
    scheduler.run_due()  # a real failed attempt, recorded by the scheduler's own history
    assert [a.outcome for a in scheduler.history("h-1")] == ["failed"]
    page = TestClient(app(scheduler, clock=clock)).get("/timer?id=h-1").text
    assert 'id="history"' in page and "TimeoutError: gateway" in page and local_node() in page
    assert 'id="no-history"' not in page
    plain = TestClient(app(_Forgetful(scheduler), clock=clock)).get("/timer?id=h-1").text
    assert 'id="no-history"' in plain and 'id="history"' not in plain


def test_a_timers_attempts_show_on_mongodb(seeded: Any, client: Any, clock: ManualClock) -> None:
    from flowsched.history import HistoryPolicy
    from flowsched.mongo.history import MongoHistory, attempt_document
    from flowsched.steering import Attempt

    ended = START + timedelta(seconds=2)
    failed = Attempt("node-a", START, ended, "failed", "TimeoutError", "gateway <down>",
                     'File "pay.py", line 7', generation=6, attempt=0)  # fmt: skip
    writer = MongoHistory(clock.now, "node-a", HistoryPolicy(limit=5))
    records = [("t-00005", attempt_document(failed, "k-1"))] * 2  # a write repeated: shown once
    records.append(("gone-1", attempt_document(failed, "k-2")))
    for write in writer.writes(records):
        seeded.timers_history.update_one(write.filter, write.update, upsert=True)
    assert seeded.timers_history.find_one({"_id": "t-00005"})["expires_at"] is not None
    lease = START + timedelta(minutes=30)
    claim = {"owner": "node-b", "token": "tok-9", "lease_until": lease, "at": START + timedelta(1)}
    seeded.timers.update_one({"_id": "t-00005"}, {"$set": {"claim": claim}})
    page = client().get("/timer?id=t-00005").text
    rows = re.findall(r"<tr class=\"[a-z]*\"><td>\d+</td><td>([^<]+)</td>", page)
    assert rows == ["node-a", "node-b"]  # oldest first; the running one from the claim
    assert "TimeoutError: gateway &lt;down&gt;" in page and "pay.py" in page and "running" in page
    gone = client().get("/timer?id=gone-1").text  # kept after the item is gone
    assert 'id="not-found"' in gone and "TimeoutError" in gone
    none = client().get("/timer?id=t-00007").text
    assert 'id="history"' in none and "No attempt yet." in none and 'id="no-history"' not in none
