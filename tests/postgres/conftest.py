"""Fixtures of the PostgreSQL tests: the server at ``FLOWSCHED_POSTGRES_URL`` (``make test``
starts one) and fresh table names, dropped after each test.

Without the variable the tests skip, saying so; in CI (``CI=true``) they fail instead, so a
server that did not start can never pass as green.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

psycopg = pytest.importorskip("psycopg")

from flowsched.postgres.schema import drop_tables  # noqa: E402


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get("FLOWSCHED_POSTGRES_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("FLOWSCHED_POSTGRES_URL is not set in CI: run the suite with `make test`")
        pytest.skip("FLOWSCHED_POSTGRES_URL not set (run `make test` to start the test server)")
    return url


@pytest.fixture
def fresh_table(postgres_url: str) -> Iterator[Callable[[], str]]:
    """``fresh_table()``: a new table name for this test; all are dropped afterwards."""
    made: list[str] = []

    def fresh() -> str:
        name = f"fs_{uuid.uuid4().hex[:12]}"
        made.append(name)
        return name

    yield fresh
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in made:
            drop_tables(conn, name)
