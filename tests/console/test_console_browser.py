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
from console_kit import START, TOKEN, dead_letter, make_index, timer

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
        "operator": Served(app(database, token=TOKEN, clock=clock)),
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


def test_overview(page: Any, servers: dict[str, Served]) -> None:
    page.goto(servers["operator"].url + "/")
    assert page.locator("h1").inner_text() == "Overview"
    assert page.locator("svg.chart rect.bar").count() > 0
    assert "1 dead letters" in page.locator("#failures").inner_text()
    shot(page, "overview")


def test_filter_and_page_through_5000_timers(page: Any, servers: dict[str, Served]) -> None:
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
    page.goto(servers["operator"].url + "/timers?id=t-0000")
    follow(page, "text=t-00007")
    assert page.locator("#timer-id").inner_text() == "t-00007"
    assert "TimeoutError: payment gateway" in page.locator("#fields").inner_text()
    shot(page, "timer")


def test_cancel_with_the_token_and_see_the_audit(
    page: Any, servers: dict[str, Served], database: Any
) -> None:
    base = servers["operator"].url
    page.goto(base + "/login")
    page.fill("input[name=operator]", "alice")
    page.fill("input[name=token]", TOKEN)
    follow(page, "#login button")
    assert "operator: alice" in page.locator("header").inner_text()
    page.goto(base + "/timer?id=t-04999")
    follow(page, "#cancel button")
    audit = page.locator("#audit").inner_text()
    assert "alice" in audit and "cancelled t-04999" in audit
    assert database.timers.find_one({"_id": "t-04999"}) is None
    shot(page, "audit")


def test_requeue_a_dead_letter(page: Any, servers: dict[str, Served], database: Any) -> None:
    base = servers["operator"].url
    page.goto(base + "/dead")
    shot(page, "dead_letters")
    page.fill("form.requeue input[name=token]", TOKEN)
    page.fill("form.requeue input[name=operator]", "bob")
    follow(page, "form.requeue button")
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
