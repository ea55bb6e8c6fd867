"""The console on the MongoDB-wire server, through ``pymongo.AsyncMongoClient``: the pages
answer from indexes (explain: no COLLSCAN), actions are fenced and audited, and a URI's
password stays out of every page."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from console_kit import TOKEN, csrf_of, dead_letter, make_index, sign_in, timer
from starlette.testclient import TestClient

from flowsched.clock import ManualClock
from flowsched.console import app
from flowsched.console.queries import TimerQuery

pytestmark = pytest.mark.wire


@pytest.fixture
def stored(mongo_db: Any) -> Any:
    make_index(mongo_db.timers)
    mongo_db.timers.insert_many([timer(n) for n in range(300)])
    mongo_db.timers_dead.insert_one(dead_letter("d-1"))
    return mongo_db


def test_pages_and_actions_over_the_async_driver(
    mongo_uri: str, stored: Any, clock: ManualClock
) -> None:
    with TestClient(app(mongo_uri, database=stored.name, token=TOKEN, clock=clock)) as console:
        assert console.get("/timers", follow_redirects=False).status_code == 303
        sign_in(console)
        first = console.get("/timers")
        assert first.status_code == 200 and first.text.count("timer-link") == 50
        assert console.get("/timers?flow=flow-3").text.count("timer-link") == 43
        assert "300 due in the next 24 h" in console.get("/").text
        html = console.get("/timer?id=t-00010").text
        data = {"csrf": csrf_of(html), "id": "t-00010", "generation": "11"}
        assert console.post("/timer/cancel", data=data).status_code == 200
        page = console.get("/dead").text
        console.post("/dead/requeue", data={"csrf": csrf_of(page), "id": "d-1", "generation": "77"})
    assert stored.timers.find_one({"_id": "t-00010"}) is None
    assert stored.timers.find_one({"_id": "d-1"})["attempts"] == 0
    assert [a["action"] for a in stored.timers_audit.find({}).sort("at", 1)] == [
        "sign_in",
        "cancel",
        "requeue",
    ]
    assert "due_id" in stored.timers.index_information()  # made for the list's order


def test_bulk_actions_over_the_async_driver(
    mongo_uri: str, stored: Any, clock: ManualClock
) -> None:
    stored.timers_dead.insert_many([dead_letter(f"dl-{n}") for n in range(40)])
    with TestClient(app(mongo_uri, database=stored.name, token=TOKEN, clock=clock)) as console:
        sign_in(console)
        csrf = csrf_of(console.get("/timers").text)
        done = console.post("/bulk/cancel", data={"csrf": csrf, "handler": "alpha"})
        assert 'id="bulk-done">150 done<' in done.text
        done = console.post("/bulk/requeue", data={"csrf": csrf, "handler": "alpha"})
        assert 'id="bulk-done">41 done<' in done.text
    assert stored.timers.count_documents({"handler": "alpha"}) == 41
    assert stored.timers_dead.count_documents({}) == 0
    entries = list(stored.timers_audit.find({"action": {"$regex": "^bulk_"}}))
    assert sorted(e["count"] for e in entries) == [41, 150]


def test_list_queries_walk_an_index(mongo_uri: str, stored: Any) -> None:
    import pymongo

    async def plans() -> list[str]:
        client: Any = pymongo.AsyncMongoClient(mongo_uri)
        found = []
        now = stored.timers.find_one({})["due"]
        after = TimerQuery().cursor_of({"due": now, "_id": "t-00000"})
        specs = [TimerQuery().find(now), TimerQuery(flow_prefix="flow-1").find(now)]
        specs += [TimerQuery(after=after).find(now), TimerQuery(before=after).find(now)]
        for spec in specs:
            cursor = client[stored.name].timers.find(spec.filter).sort(spec.sort).hint(spec.hint)
            plan = await cursor.limit(spec.limit).explain()
            found.append(str(plan["queryPlanner"]["winningPlan"]))
        await client.close()
        return found

    with TestClient(app(mongo_uri, database=stored.name)) as console:
        console.get("/timers")  # the console makes the (due, _id) index it walks
    plans_seen = asyncio.run(plans())
    for plan in plans_seen:
        assert "IXSCAN" in plan and "'due_id'" in plan and "COLLSCAN" not in plan


def test_a_password_in_the_uri_is_never_shown(mongo_uri: str, stored: Any) -> None:
    parts = urlsplit(mongo_uri)
    secret_uri = urlunsplit(parts._replace(netloc=f"ops:t0p-s3cret@{parts.netloc}"))
    with TestClient(app(secret_uri, database=stored.name, query_budget_ms=2000)) as console:
        for url in ["/", "/timers", "/timer?id=t-00001", "/nodes"]:
            page = console.get(url)
            assert page.status_code in (200, 503), url
            assert "t0p-s3cret" not in page.text
            assert "ops:***@" in page.text


def test_a_uri_console_serves_requests_on_any_event_loop(mongo_uri: str, stored: Any) -> None:
    # Outside `with`, the test client runs each request on a loop of its own: the async
    # driver's client belongs to one loop, so each loop must get its own (it was a 500).
    console = TestClient(app(mongo_uri, database=stored.name), raise_server_exceptions=False)
    pages = [console.get("/timers") for _ in range(3)]
    assert [page.status_code for page in pages] == [200, 200, 200]
    assert all(page.text.count("timer-link") == 50 for page in pages)


def test_a_timers_attempts_over_the_async_driver(
    mongo_uri: str, stored: Any, clock: ManualClock
) -> None:
    from datetime import timedelta

    from console_kit import START

    from flowsched.mongo.history import MongoHistory, attempt_document
    from flowsched.steering import Attempt

    failed = Attempt("node-w", START, START + timedelta(seconds=1), "failed", "KeyError", "'sku'")
    for write in MongoHistory(clock.now, "node-w").writes(
        [("t-00003", attempt_document(failed, "k"))]
    ):
        stored.timers_history.update_one(write.filter, write.update, upsert=True)
    with TestClient(app(mongo_uri, database=stored.name, clock=clock)) as console:
        page = console.get("/timer?id=t-00003").text
    assert 'id="history"' in page and "node-w" in page and "KeyError: &#39;sku&#39;" in page
