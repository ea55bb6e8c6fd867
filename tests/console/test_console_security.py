"""Security: read-only without a token; token + CSRF for actions, each audited; escaping;
no password in any page or log."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from console_kit import TOKEN, USERS, csrf_of, sign_in, timer
from starlette.testclient import TestClient

from flowsched.console import app

XSS = "<script>alert(1)</script>"


def form_for(client: TestClient, item_id: str = "t-00001") -> dict[str, str]:
    html = client.get(f"/timer?id={item_id}").text
    return {"csrf": csrf_of(html), "id": item_id, "generation": str(int(item_id[2:]) + 1)}


def test_read_only_console_offers_no_action_and_refuses_posts(seeded: Any, client: Any) -> None:
    console = client()
    page = console.get("/timer?id=t-00001").text
    assert '<form method="post"' not in page and "read-only" in page
    assert "Requeue" not in console.get("/dead").text
    csrf = "not-a-csrf-token"  # a read-only page has no form, so no CSRF token to copy
    for url, data in [("/timer/cancel", {"id": "t-00001", "generation": "2", "csrf": csrf,
                       "token": TOKEN}), ("/dead/requeue", {"id": "d-1", "generation": "77"}),
                      ("/timer/run-now", {"id": "t-00001"})]:  # fmt: skip
        assert console.post(url, data=data).status_code == 403
    assert seeded.timers.count_documents({}) == 120 and seeded.timers_dead.count_documents({}) == 1
    refusals = list(seeded.timers_audit.find({}))
    assert len(refusals) == 3 and not any(r["done"] for r in refusals)
    assert all(r["who"] is None for r in refusals)  # no identity: none typed is taken


@pytest.mark.parametrize(
    "change",
    [
        {"signed_in": False},  # not signed in
        {"signed_in": False, "token": TOKEN},  # the token in a form signs nobody in
        {"csrf": "0" * 64},
        {"csrf": None},
    ],
)
def test_a_refused_cancel_is_403_and_changes_nothing(
    seeded: Any, client: Any, change: dict[str, Any]
) -> None:
    console = client(TOKEN)
    if change.pop("signed_in", True):
        sign_in(console)
    else:
        console.cookies.set("flowsched_csrf", "x" * 32)
    data = form_for(console) if "flowsched_session" in console.cookies else {
        "csrf": "whatever", "id": "t-00001", "generation": "2"}  # fmt: skip
    for name, value in change.items():
        if value is None:
            data.pop(name, None)
        else:
            data[name] = value
    assert console.post("/timer/cancel", data=data).status_code == 403
    assert seeded.timers.find_one({"_id": "t-00001"}) is not None
    refusals = list(seeded.timers_audit.find({"action": {"$ne": "sign_in"}}))
    assert [(r["action"], r["done"]) for r in refusals] == [("cancel", False)]


def test_csrf_token_of_another_browser_is_refused(seeded: Any, client: Any) -> None:
    mine, theirs = client(TOKEN), client(TOKEN)
    sign_in(mine)
    sign_in(theirs)
    data = form_for(theirs)  # the attacker's own page: its csrf matches its own cookie only
    assert mine.post("/timer/cancel", data=data).status_code == 403
    assert seeded.timers.find_one({"_id": "t-00001"}) is not None


def test_cancel_when_signed_in_is_done_once_and_audited(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "alice")
    data = form_for(console)
    first = console.post("/timer/cancel", data=data, follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/timer?id=t-00001"
    assert seeded.timers.find_one({"_id": "t-00001"}) is None
    assert console.post("/timer/cancel", data=data).status_code == 200  # gone; the audit stays
    audit = list(seeded.timers_audit.find({"action": "cancel"}).sort("at", 1))
    assert [(a["action"], a["who"], a["done"]) for a in audit] == [
        ("cancel", "alice", True),
        ("cancel", "alice", False),
    ]
    page = console.get("/timer?id=t-00001").text
    assert "cancelled t-00001" in page and "alice" in page and "nothing cancelled" in page


def test_the_token_signs_in_as_token_whatever_name_is_typed(seeded: Any, client: Any) -> None:
    console = client(TOKEN)
    page = console.get("/login")
    console.post("/login", data={"csrf": csrf_of(page.text), "user": "", "secret": TOKEN})
    console.post("/timer/run-now", data=form_for(console))
    stored = seeded.timers.find_one({"_id": "t-00001"})
    assert stored["due"] == stored["ready_at"]
    assert seeded.timers_audit.find_one({"action": "run_now"})["who"] == "token"


def test_a_stale_page_does_not_cancel_a_timer_scheduled_since(seeded: Any, client: Any) -> None:
    console = client(TOKEN)
    sign_in(console)
    data = form_for(console)
    seeded.timers.update_one({"_id": "t-00001"}, {"$set": {"generation": 999}})
    console.post("/timer/cancel", data=data)
    assert seeded.timers.find_one({"_id": "t-00001"}) is not None
    found = seeded.timers_audit.find_one({"action": "cancel"})
    assert "changed since the page was shown" in found["outcome"]


def test_requeue_a_dead_letter(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "bob")
    page = console.get("/dead").text
    assert "Requeue" in page
    data = {"csrf": csrf_of(page), "id": "d-1", "generation": "77"}
    assert console.post("/dead/requeue", data=data).status_code == 200
    stored = seeded.timers.find_one({"_id": "d-1"})
    assert stored["attempts"] == 0 and stored["route"] == "h:alpha"
    assert seeded.timers_dead.count_documents({}) == 0
    assert seeded.timers_audit.find_one({"action": "requeue"})["outcome"].startswith("requeued")


def test_ids_payloads_and_errors_render_as_text(seeded: Any, client: Any) -> None:
    seeded.timers.insert_one(
        {
            **timer(900, id=XSS, payload={"html": XSS}),
            "last_error": XSS,
            "attempts": 1,
            "deliveries": 1,
        }
    )
    console = client(TOKEN)
    sign_in(console)
    xss_page = "/timer?id=%3Cscript%3Ealert(1)%3C/script%3E"
    for url in ["/timers?id=%3C", "/timers?state=retrying", xss_page]:
        html = console.get(url).text
        assert XSS not in html, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url
    bad = console.get("/timers?kind=%3Cscript%3E")
    assert bad.status_code == 400 and "<script>" not in bad.text


def test_responses_carry_a_content_security_policy(client: Any) -> None:
    headers = client().get("/").headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"


def test_uri_password_never_in_pages_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    uri = "mongodb://ops:hunter2-s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=200"
    caplog.set_level(logging.DEBUG)
    with TestClient(app(uri, query_budget_ms=300)) as console:
        pages = [console.get(url) for url in ["/", "/timers", "/timer?id=x", "/dead", "/nodes"]]
    assert {page.status_code for page in pages} == {503}
    assert "ops:***@127.0.0.1" in pages[0].text
    for page in pages:
        assert "hunter2" not in page.text
    assert "hunter2" not in caplog.text


def test_bad_token_file_is_refused(tmp_path: Any, seeded: Any) -> None:
    empty = tmp_path / "token"
    empty.write_text("  \n")
    with pytest.raises(ValueError, match="at least 8"):
        app(seeded, token_file=empty)
    good = tmp_path / "good"
    good.write_text(TOKEN + "\n")
    with TestClient(app(seeded, token_file=good)) as console:
        assert "Sign in" in console.get("/").text  # the sign-in page: reads need one
