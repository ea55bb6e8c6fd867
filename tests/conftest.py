"""Fixtures shared by the whole suite.

Wire-level MongoDB tests use ``FLOWSCHED_MONGO_URI`` (set by ``make test``, which starts the
local MongoDB-wire test server; point it at a real MongoDB to run the same tests there).
Without it they are skipped locally, and fail in CI (``CI=true``) so a broken server
start can never pass as green.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``make test``'s two xdist workers (``--dist loadgroup``), the tests that start
    node processes run one after another on one worker, as they would alone: their leases
    and waits are sized for one cluster at a time on the shared server, not two. (A module
    may name a group of its own: the browser tests share one chromium.)"""
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group("node-processes"))


@pytest.fixture(scope="session")
def mongo_uri() -> str:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        if os.environ.get("CI"):
            pytest.fail("FLOWSCHED_MONGO_URI is not set in CI: run the suite with `make test`")
        pytest.skip("FLOWSCHED_MONGO_URI not set (run `make test` to start the wire server)")
    return uri


@pytest.fixture(scope="session")
def mongo_client(mongo_uri: str) -> Iterator[Any]:
    pymongo = pytest.importorskip("pymongo")
    client = pymongo.MongoClient(mongo_uri, serverSelectionTimeoutMS=10_000)
    client.admin.command("ping")
    yield client
    client.close()


@pytest.fixture
def mongo_db(mongo_client: Any) -> Iterator[Any]:
    """A fresh database on the wire server for one test, dropped afterwards."""
    name = f"fs_test_{uuid.uuid4().hex[:12]}"
    db = mongo_client[name]
    yield db
    mongo_client.drop_database(name)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The PostgreSQL server at ``FLOWSCHED_POSTGRES_URL`` (``make test`` starts one):
    skipped without it, failed in CI, like ``mongo_uri``."""
    url = os.environ.get("FLOWSCHED_POSTGRES_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("FLOWSCHED_POSTGRES_URL is not set in CI: run the suite with `make test`")
        pytest.skip("FLOWSCHED_POSTGRES_URL not set (run `make test` to start the test server)")
    return url


@pytest.fixture
def fresh_table(postgres_url: str) -> Iterator[Any]:
    """``fresh_table()``: a new PostgreSQL table name for this test; each one (with its
    companions) is dropped afterwards."""
    psycopg = pytest.importorskip("psycopg")
    from flowsched.postgres.schema import drop_tables

    made: list[str] = []

    def fresh() -> str:
        name = f"fs_{uuid.uuid4().hex[:12]}"
        made.append(name)
        return name

    yield fresh
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in made:
            drop_tables(conn, name)
