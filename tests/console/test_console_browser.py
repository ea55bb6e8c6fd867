"""The console in a real browser (Playwright driving Debian's chromium): overview, filter and
page through 5,000 timers, one timer, cancel with the token and see the audit, requeue a dead
letter, and a read-only console that offers no action. Screenshots go to ``screenshots/``.

Skips, saying why, when Playwright or ``/usr/bin/chromium`` is missing (``make venv`` installs
chromium with apt-get where it can)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from console_kit import SECRETS, START, USERS, dead_letter, make_index, timer

from flowsched.clock import ManualClock
from flowsched.console import app

CHROMIUM = os.environ.get("FLOWSCHED_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(__file__).parent / "screenshots"
# One xdist worker runs them all (make test: --dist loadgroup), so one chromium serves them.
pytestmark = pytest.mark.xdist_group("browser")


def follow(page: Any, selector: str) -> None:
    """Click what loads a new page and wait until it has loaded: the page is served whole, so
    reading it any earlier can see the blank document of the navigation in between (a read
    that finds no rows while the next-page link already exists skips a page)."""
    with page.expect_navigation():
        page.click(selector)


sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright for Python is not installed"
)
uvicorn = pytest.importorskip("uvicorn")
mongomock = pytest.importorskip("mongomock")
if not shutil.which(CHROMIUM):
    pytest.skip(
        f"no browser at {CHROMIUM} (apt-get install chromium; `playwright install` cannot "
        "download here)",
        allow_module_level=True,
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Served:
    """A console served by uvicorn on a thread, on 127.0.0.1."""

    def __init__(self, application: Any) -> None:
        self.port = _free_port()
        config = uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the console did not start"
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def database() -> Any:
    db = mongomock.MongoClient(tz_aware=True)["flowsched"]
    make_index(db.timers)
    db.timers.insert_many([timer(n, flow_id=f"order-{n % 50:02d}") for n in range(5000)])
    failing = {"attempts": 2, "deliveries": 2, "last_error": "TimeoutError: payment gateway"}
    db.timers.update_many({"_id": {"$in": ["t-00007", "t-00009"]}}, {"$set": failing})
    db.timers_dead.insert_one(dead_letter("refund-42", "ConnectionError: ledger down"))
    db.timers_nodes.insert_one({"_id": "node-a", "routes": ["h:alpha"], "renewed_at": START,
                                "expires_at": START + timedelta(hours=1)})  # fmt: skip
    return db


@pytest.fixture(scope="module")
def servers(database: Any) -> Iterator[dict[str, Served]]:
    clock = ManualClock(START + timedelta(minutes=3, seconds=30))
    served = {
        "operator": Served(app(database, users=USERS, clock=clock)),
        "read_only": Served(app(database, clock=clock)),
    }
    yield served
    for server in served.values():
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    SHOTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sign_in(page: Any, base: str, name: str = "alice") -> None:
    page.goto(base + "/login")
    page.fill("input[name=user]", name)
    page.fill("input[name=secret]", SECRETS[name])
    follow(page, "#login button")
    assert f": {name}" in page.locator("#mode").inner_text()


def test_overview(page: Any, servers: dict[str, Served]) -> None:
    page.goto(servers["operator"].url + "/")
    assert "/login" in page.url  # reads need a sign-in on a console with identities
    sign_in(page, servers["operator"].url, "vera")
    page.goto(servers["operator"].url + "/")
    assert page.locator("h1").inner_text() == "Overview"
    assert page.locator("svg.chart rect.bar").count() > 0
    assert "1 dead letters" in page.locator("#failures").inner_text()
    shot(page, "overview")


def test_filter_and_page_through_5000_timers(page: Any, servers: dict[str, Served]) -> None:
    sign_in(page, servers["operator"].url, "vera")
    page.goto(servers["operator"].url + "/timers")
    page.fill("input[name=limit]", "200")
    follow(page, "#filters button[type=submit]")
    seen: list[str] = []
    while True:
        seen += page.locator("a.timer-link").all_inner_texts()
        if page.locator("#next-page").count() == 0:
            break
        follow(page, "#next-page")
    assert seen == [f"t-{n:05d}" for n in range(5000)]
    page.goto(servers["operator"].url + "/timers")
    page.fill("input[name=flow]", "order-07")
    follow(page, "#filters button[type=submit]")
    first = page.locator("a.timer-link").all_inner_texts()
    follow(page, "#next-page")
    second = page.locator("a.timer-link").all_inner_texts()
    expected = [f"t-{n:05d}" for n in range(5000) if n % 50 == 7]
    assert first + second == expected[:100]
    shot(page, "timers")


def test_open_one_timer(page: Any, servers: dict[str, Served]) -> None:
    sign_in(page, servers["operator"].url, "vera")
    page.goto(servers["operator"].url + "/timers?id=t-0000")
    follow(page, "text=t-00007")
    assert page.locator("#timer-id").inner_text() == "t-00007"
    assert "TimeoutError: payment gateway" in page.locator("#fields").inner_text()
    shot(page, "timer")


def test_cancel_with_the_token_and_see_the_audit(
    page: Any, servers: dict[str, Served], database: Any
) -> None:
    base = servers["operator"].url
    sign_in(page, base, "alice")
    assert "operator: alice" in page.locator("header").inner_text()
    page.goto(base + "/timer?id=t-04999")
    follow(page, "#cancel button")
    audit = page.locator("#audit").inner_text()
    assert "alice" in audit and "cancelled t-04999" in audit
    assert database.timers.find_one({"_id": "t-04999"}) is None
    shot(page, "audit")


def test_requeue_a_dead_letter(page: Any, servers: dict[str, Served], database: Any) -> None:
    base = servers["operator"].url
    sign_in(page, base, "bob")
    page.goto(base + "/dead")
    shot(page, "dead_letters")
    follow(page, "a.dead-link")
    assert "ConnectionError: ledger down" in page.locator("#dead-letter").inner_text()
    assert "alpha" in page.locator("#dead-letter").inner_text()
    follow(page, "#requeue button")
    assert "requeued refund-42" in page.locator("#audit").inner_text()
    assert database.timers.find_one({"_id": "refund-42"})["attempts"] == 0
    page.goto(base + "/nodes")
    shot(page, "nodes")


def test_read_only_console_offers_no_action(page: Any, servers: dict[str, Served]) -> None:
    base = servers["read_only"].url
    for url in ["/timer?id=t-00001", "/dead", "/timers", "/"]:
        page.goto(base + url)
        assert page.locator("form[method=post]").count() == 0, url
        assert page.locator("#mode").inner_text() == "read-only"
    page.goto(base + "/timer?id=t-00001")
    shot(page, "read_only")


def test_bulk_cancel_of_a_flow_returns_to_the_list(
    page: Any, servers: dict[str, Served], database: Any
) -> None:
    base = servers["operator"].url
    sign_in(page, base, "alice")
    page.goto(base + "/timers?flow=order-49")
    before = int(page.locator("#count").inner_text())
    assert before == database.timers.count_documents({"flow_id": "order-49"}) > 0
    follow(page, "#bulk-cancel")
    assert page.locator("#preview-count").inner_text() == str(before)
    shot(page, "bulk_preview")
    follow(page, "#confirm button")
    assert f"{before} done" in page.locator("#bulk-done").inner_text()
    follow(page, "#back")
    assert "/timers?flow=order-49" in page.url and page.locator("#count").inner_text() == "0"
    page.goto(base + "/audit?action=bulk_cancel")
    assert f"{before} ids" in page.locator("#audit").inner_text()


def test_the_layout_holds_at_800_px(browser: Any, servers: dict[str, Served]) -> None:
    context = browser.new_context(viewport={"width": 800, "height": 900})
    narrow = context.new_page()
    base = servers["operator"].url
    sign_in(narrow, base, "alice")
    for url in ["/", "/timers", "/timer?id=t-00007", "/dead", "/nodes", "/audit",
                "/timer?id=refund-42"]:  # fmt: skip
        narrow.goto(base + url)
        width = narrow.evaluate("document.documentElement.scrollWidth")
        assert width <= 800, (url, width)
    narrow.goto(base + "/timers")
    shot(narrow, "timers_800px")
    context.close()


def test_a_stale_overview_says_so(page: Any, servers: dict[str, Served]) -> None:
    base = servers["operator"].url
    sign_in(page, base, "vera")
    page.goto(base + "/")
    page.route("**/overview/live*", lambda route: route.abort())
    page.wait_for_selector("#live[data-stale]", timeout=15_000)
    banner = page.evaluate("getComputedStyle(document.getElementById('live'), '::before').content")
    assert "Stale" in banner
    shot(page, "stale")
