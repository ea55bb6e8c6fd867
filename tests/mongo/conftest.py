"""Fixtures for the MongoDB adapter's own tests (the shared contract suite is elsewhere)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from mongo_nodes import Nodes  # noqa: E402

from flowsched.clock import ManualClock  # noqa: E402
from flowsched.mongo import MongoScheduler  # noqa: E402

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def collection() -> Any:
    """A fresh mongomock collection named ``timers``."""
    return mongomock.MongoClient()["flowsched"]["timers"]


@pytest.fixture
def make(collection: Any, clock: ManualClock) -> Iterator[Callable[..., MongoScheduler]]:
    """Build schedulers on ``collection`` (ManualClock by default); closed after the test."""
    built: list[MongoScheduler] = []

    def build(**options: Any) -> MongoScheduler:
        options.setdefault("clock", clock)
        options.setdefault("node_id", f"node-{len(built)}")
        scheduler = MongoScheduler(options.pop("collection", collection), **options)
        built.append(scheduler)
        return scheduler

    yield build
    for scheduler in built:
        scheduler.close()


# -- several scheduler processes on the wire server -------------------------------------------


@pytest.fixture
def nodes(mongo_uri: str, mongo_db: Any) -> Iterator[Nodes]:
    """Start scheduler processes on the test's database; all are killed at teardown."""
    group = Nodes(mongo_uri, mongo_db.name)
    yield group
    group.kill_all()
