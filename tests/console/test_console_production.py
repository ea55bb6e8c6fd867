"""The console in production (CONTRACT section 17), over HTTP: reads need a sign-in, Host is
checked, sign-out revokes the session, sign-ins are throttled, proxy headers are believed from
trusted proxies only, every response carries the security headers, and the audit holds the
identity the server established."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from console_kit import SECRETS, TOKEN, USERS, csrf_of, sign_in
from starlette.testclient import TestClient

from flowsched.clock import ManualClock
from flowsched.console import app
from flowsched.console.application import LOOPBACK_HOSTS
from flowsched.console.sessions import MAX_LOCK

PAGES = ["/", "/timers", "/timer?id=t-00001", "/dead", "/quarantine", "/nodes", "/audit",
         "/bulk/cancel?handler=alpha"]  # fmt: skip
PROXY = ("10.0.0.5", 4000)


def form_for(console: TestClient, item_id: str = "t-00001") -> dict[str, str]:
    html = console.get(f"/timer?id={item_id}").text
    return {"csrf": csrf_of(html), "id": item_id, "generation": str(int(item_id[2:]) + 1)}


@pytest.mark.parametrize("identities", [{"users": USERS}, {"token": TOKEN},
                         {"trusted_proxies": ["10.0.0.0/8"], "user_header": "X-User"}])  # fmt: skip
def test_reads_need_a_sign_in_when_identities_exist(
    client: Any, identities: dict[str, Any]
) -> None:
    console = client(**identities)
    for url in PAGES:
        response = console.get(url, follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"] == "/login", url
        assert "t-00001" not in response.text
    assert console.get("/overview/live").status_code == 401
    assert console.get("/static/console.css").status_code == 200


def test_a_viewer_reads_and_is_refused_actions(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "vera")
    assert console.get("/timers").status_code == 200
    page = console.get("/timer?id=t-00001").text
    assert 'id="cancel"' not in page and "viewer: vera" in page
    refused = console.post("/timer/cancel", data=form_for(console))
    assert refused.status_code == 403 and "viewer" in refused.text
    assert seeded.timers.find_one({"_id": "t-00001"}) is not None


def test_another_host_is_refused(client: Any) -> None:
    console = client(allowed_hosts=LOOPBACK_HOSTS)
    bad = console.get("/timers", headers={"host": "attacker.example"})
    assert bad.status_code == 400 and "t-00001" not in bad.text
    assert bad.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in bad.headers["content-security-policy"]
    for host in ["localhost:8765", "127.0.0.1", "[::1]:8765"]:
        assert console.get("/timers", headers={"host": host}).status_code == 200, host


def test_a_cookie_replayed_after_sign_out_is_refused(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "alice")
    cookie = console.cookies["flowsched_session"]
    page = console.get("/timer?id=t-00001").text
    out = console.post("/logout", data={"csrf": csrf_of(page)}, follow_redirects=False)
    assert out.status_code == 303
    thief = client(users=USERS)
    thief.cookies.set("flowsched_session", cookie)
    assert thief.get("/timers", follow_redirects=False).status_code == 303
    thief.cookies.set("flowsched_csrf", console.cookies["flowsched_csrf"])
    data = {"csrf": csrf_of(page), "id": "t-00001", "generation": "2"}
    assert thief.post("/timer/run-now", data=data).status_code == 403
    assert seeded.timers_audit.count_documents({"action": "run_now", "done": True}) == 0
    actions = [a["action"] for a in seeded.timers_audit.find({}).sort("at", 1)]
    assert actions[:2] == ["sign_in", "sign_out"] and actions[-1] == "run_now"


def test_logout_needs_its_csrf_token(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "alice")
    assert console.post("/logout", data={}).status_code == 403
    assert console.get("/timers", follow_redirects=False).status_code == 200  # still in


def test_a_session_ends_after_its_ttl(client: Any, clock: ManualClock) -> None:
    console = client(users=USERS, session_ttl=timedelta(minutes=30))
    sign_in(console, "bob")
    assert console.get("/timers", follow_redirects=False).status_code == 200
    clock.advance(timedelta(minutes=31))
    assert console.get("/timers", follow_redirects=False).status_code == 303


def test_300_bad_sign_ins_are_throttled_and_the_right_secret_works_after(
    seeded: Any, client: Any, clock: ManualClock
) -> None:
    console = client(users=USERS)
    csrf = csrf_of(console.get("/login").text)
    statuses: list[int] = []
    waits: list[int] = []
    for _ in range(300):
        answer = console.post("/login", data={"csrf": csrf, "user": "alice", "secret": "wrong"})
        statuses.append(answer.status_code)
        if answer.status_code == 429:
            waits.append(int(answer.headers["retry-after"]))
            assert answer.headers["cache-control"] == "no-store"
            clock.advance(timedelta(seconds=waits[-1]))  # wait it out: the next one is looked at
    assert statuses[:5] == [403] * 5 and set(statuses) == {403, 429}
    assert statuses.count(429) >= 100  # past the first five, every other one is turned away
    assert waits == sorted(waits) and waits[0] == 1
    assert max(waits) == MAX_LOCK.total_seconds()
    good = {"csrf": csrf, "user": "alice", "secret": SECRETS["alice"]}
    assert console.post("/login", data=good, follow_redirects=False).status_code == 429
    clock.advance(MAX_LOCK / 2)  # still locked: the right secret is not even looked at
    assert console.post("/login", data=good, follow_redirects=False).status_code == 429
    clock.advance(MAX_LOCK / 2)
    assert console.post("/login", data=good, follow_redirects=False).status_code == 303
    refused = seeded.timers_audit.count_documents({"action": "sign_in", "done": False})
    assert refused == statuses.count(403)
    assert seeded.timers_audit.count_documents({"action": "throttled"}) >= 1


def test_proxy_headers_are_believed_from_trusted_proxies_only(seeded: Any) -> None:
    options = {"users": USERS, "trusted_proxies": ["10.0.0.0/8"], "user_header": "X-User"}
    clock = ManualClock(seeded.timers.find_one({})["due"])
    via_proxy = TestClient(app(seeded, clock=clock, **options), client=PROXY)
    headers = {"x-user": "alice", "x-forwarded-for": "198.51.100.7, 10.0.0.9"}
    page = via_proxy.get("/timer?id=t-00001", headers=headers)
    assert page.status_code == 200 and "operator: alice" in page.text
    data = {"csrf": csrf_of(page.text), "id": "t-00001", "generation": "2"}
    assert via_proxy.post("/timer/cancel", data=data, headers=headers).status_code == 200
    done = seeded.timers_audit.find_one({"action": "cancel"})
    assert (done["who"], done["client"], done["done"]) == ("alice", "198.51.100.7", True)
    direct = TestClient(app(seeded, clock=clock, **options), client=("192.0.2.9", 5000))
    assert direct.get("/timers", headers=headers, follow_redirects=False).status_code == 303
    direct.post("/timer/cancel", data={"csrf": "x", "id": "t-00002"}, headers=headers)
    refused = seeded.timers_audit.find_one({"action": "cancel", "done": False})
    assert (refused["who"], refused["client"]) == (None, "192.0.2.9")


def test_the_audit_holds_the_established_identity_never_a_typed_name(
    seeded: Any, client: Any
) -> None:
    console = client(users=USERS)
    page = console.get("/login").text
    console.post("/login", data={"csrf": csrf_of(page), "user": "alice", "secret": "nope"})
    sign_in(console, "bob")
    data = {**form_for(console), "operator": "mallory", "who": "mallory"}
    console.post("/timer/run-now", data=data, headers={"x-forwarded-for": "203.0.113.1"})
    console.post("/timer/cancel", data={**data, "csrf": "forged"})
    console.post("/timer/cancel", data={**data, "generation": "99999999999999999999"})
    entries = list(seeded.timers_audit.find({}).sort("at", 1))
    seen = [(e["action"], e["who"], e["done"]) for e in entries]
    assert seen == [
        ("sign_in", None, False),
        ("sign_in", "bob", True),
        ("run_now", "bob", True),
        ("cancel", "bob", False),  # CSRF
        ("cancel", "bob", False),  # a generation MongoDB cannot hold: 400, recorded
    ]
    assert all(e["client"] == "testclient" for e in entries)  # X-Forwarded-For not believed
    assert "mallory" not in str(entries[1:])
    listed = console.get("/audit?who=bob&outcome=refused").text
    assert listed.count('class="refused"') == 2 and "wrong CSRF token" in listed


def test_a_failed_action_is_audited(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    sign_in(console, "alice")
    data = form_for(console)
    seeded.timers.delete_one = None  # the driver call fails (TypeError) inside the action
    answer = console.post("/timer/cancel", data=data)
    assert answer.status_code == 500 and answer.headers["cache-control"] == "no-store"
    failed = seeded.timers_audit.find_one({"action": "cancel"})
    assert failed["who"] == "alice" and not failed["done"] and "failed" in failed["outcome"]


def test_every_response_has_the_headers_and_no_store(seeded: Any, client: Any) -> None:
    console = client(users=USERS)
    responses = [console.get("/login"), console.get("/nope"), console.get("/timers"),
                 console.post("/login", data={}), console.get("/static/console.css")]  # fmt: skip
    sign_in(console, "alice")
    responses += [console.get("/timers?limit=0"), console.get("/timer?id=t-00001")]
    seeded.timers.find = None  # a crash inside a page: the 500 still has the headers
    responses.append(console.get("/timers"))
    assert [r.status_code for r in responses] == [200, 404, 200, 403, 200, 400, 200, 500]
    for response in responses:
        assert response.headers["cache-control"] == "no-store"
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"


def test_a_bad_filter_keeps_the_form(client: Any) -> None:
    console = client()
    for query in ["due_from=9999-12-31T23:59:59-14:00", "due_to=0001-01-01T00:00:00%2B14:00",
                  "after=" + "1" * 30, "before=" + "9" * 30]:  # fmt: skip
        page = console.get(f"/timers?handler=alpha&{query}")
        assert page.status_code == 400, query
        assert 'id="filters"' in page.text and 'name="handler" value="alpha"' in page.text
        assert 'id="problem"' in page.text


def test_hide_payloads_shows_sizes(seeded: Any, client: Any) -> None:
    shown = client().get("/timer?id=t-00003").text
    hidden = client(hide_payloads=True).get("/timer?id=t-00003").text
    assert "&#34;n&#34;: 3" in shown or '"n": 3' in shown
    assert "bytes (hidden)" in hidden and '"n": 3' not in hidden and "&#34;n&#34;" not in hidden


def test_a_users_file_others_can_read_is_named(
    tmp_path: Any, seeded: Any, caplog: pytest.LogCaptureFixture
) -> None:
    users = tmp_path / "users"
    users.write_text(f"alice:operator:{USERS['alice'].hash}\n")
    users.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        app(seeded, users_file=users)
    assert str(users) in caplog.text and "chmod 600" in caplog.text
    caplog.clear()
    users.chmod(0o600)
    app(seeded, users_file=users)
    assert str(users) not in caplog.text


def test_the_access_log_has_no_query_strings(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="flowsched.console.access"):
        client().get("/timers?id=secret-customer-42")
    assert "/timers" in caplog.text and "secret-customer-42" not in caplog.text


def test_cookies_are_secure_behind_a_trusted_tls_proxy(seeded: Any, clock: ManualClock) -> None:
    options = {"users": USERS, "trusted_proxies": ["10.0.0.0/8"]}
    via_proxy = TestClient(app(seeded, clock=clock, **options), client=PROXY)
    https = {"x-forwarded-proto": "https"}
    assert "secure" in via_proxy.get("/login", headers=https).headers["set-cookie"].lower()
    direct = TestClient(app(seeded, clock=clock, **options), client=("192.0.2.9", 5000))
    assert "secure" not in direct.get("/login", headers=https).headers["set-cookie"].lower()
