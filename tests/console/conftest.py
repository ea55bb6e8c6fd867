"""Fixtures for the console's tests: a seeded mongomock namespace and HTTP clients on it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
mongomock = pytest.importorskip("mongomock")

from starlette.testclient import TestClient  # noqa: E402

from flowsched.clock import ManualClock  # noqa: E402
from flowsched.console import app  # noqa: E402
from flowsched.mongo.documents import dead_letter_document, item_document  # noqa: E402
from flowsched.port import DeadLetter, ScheduleItem, ScheduleKind  # noqa: E402

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TOKEN = "operator-token-123"


def make_index(items: Any) -> None:
    """The indexes a MongoScheduler creates (the console's pages hint them)."""
    items.create_index([("route", 1), ("bucket", 1), ("ready_at", 1)], name="claim_by_route_bucket")
    items.create_index([("flow_id", 1)], name="flow_id_sparse", sparse=True)
    items.database[f"{items.name}_dead"].create_index([("dead_at", 1)], name="dead_at")


def timer(n: int, start: datetime = START, **fields: Any) -> dict[str, Any]:
    """Timer ``t-<n>`` of flow ``flow-<n % 7>``, due ``n`` minutes after ``start``."""
    item = ScheduleItem(
        fields.pop("id", f"t-{n:05d}"),
        fields.pop("kind", ScheduleKind.TIMER),
        start + timedelta(minutes=n),
        fields.pop("flow_id", f"flow-{n % 7}"),
        fields.pop("payload", {"n": n}),
        handler=fields.pop("handler", "alpha" if n % 2 else None),
    )
    return {**item_document(item, n + 1), **fields}


def dead_letter(item_id: str, error: str = "boom", generation: int = 77) -> dict[str, Any]:
    item = ScheduleItem(item_id, ScheduleKind.TIMER, START, "flow-x", {"k": 1}, handler="alpha")
    return dead_letter_document(
        DeadLetter(item.with_generation(generation), 5, error, START - timedelta(minutes=1))
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db() -> Any:
    database = mongomock.MongoClient(tz_aware=True)["flowsched"]
    make_index(database["timers"])
    return database


@pytest.fixture
def seeded(db: Any) -> Any:
    """120 timers t-00000..t-00119, one dead letter ``d-1``."""
    db.timers.insert_many([timer(n) for n in range(120)])
    db.timers_dead.insert_one(dead_letter("d-1"))
    return db


@pytest.fixture
def client(seeded: Any, clock: ManualClock) -> Iterator[Callable[..., TestClient]]:
    """``client(token=None)``: an HTTP client on the seeded namespace."""
    opened: list[TestClient] = []

    def build(token: str | None = None, target: Any = None) -> TestClient:
        test_client = TestClient(
            app(target if target is not None else seeded, token=token, clock=clock)
        )
        opened.append(test_client)
        return test_client

    yield build
    for test_client in opened:
        test_client.close()


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


def sign_in(client: TestClient, name: str = "alice") -> None:
    page = client.get("/login")
    response = client.post(
        "/login",
        data={"csrf": csrf_of(page.text), "token": TOKEN, "operator": name},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
