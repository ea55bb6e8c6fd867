"""Helpers of the console's tests: seeded documents, the token, CSRF and sign-in."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from flowsched.console.identity import User, hash_secret
from flowsched.mongo.documents import dead_letter_document, item_document
from flowsched.port import DeadLetter, ScheduleItem, ScheduleKind

if TYPE_CHECKING:
    from starlette.testclient import TestClient

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TOKEN = "operator-token-123"
SECRETS = {"alice": "alice-secret-1", "bob": "bob-secret-22", "vera": "vera-secret-333"}
"""alice and bob are operators, vera a viewer (hashes made cheap: n=1024, for speed)."""
USERS = {
    name: User(name, "viewer" if name == "vera" else "operator", hash_secret(secret, n=1024))
    for name, secret in SECRETS.items()
}


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


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


def sign_in(client: TestClient, name: str = "", secret: str | None = None) -> None:
    """Sign in as ``name`` (one of :data:`USERS`), or with the token when ``name`` is empty."""
    page = client.get("/login")
    if secret is None:
        secret = SECRETS[name] if name else TOKEN
    response = client.post(
        "/login",
        data={"csrf": csrf_of(page.text), "user": name, "secret": secret},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
