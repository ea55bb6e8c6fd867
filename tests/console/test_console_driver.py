"""Driver trouble becomes a page that says what happened: a query over its time budget asks
for a narrower filter (503), an unreachable server says so, neither is a 500."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError
from starlette.testclient import TestClient

from flowsched.console import app


class Failing:
    """A collection (sync driver's shape) whose every read raises ``error``."""

    def __init__(self, name: str, error: Exception) -> None:
        self.name = name
        self.error = error

    def find(self, *args: Any) -> Any:
        raise self.error

    def find_one(self, *args: Any) -> Any:
        raise self.error

    def aggregate(self, *args: Any, **options: Any) -> Any:
        raise self.error


class Database:
    def __init__(self, error: Exception) -> None:
        self.name = "shop"
        self.error = error

    def list_collection_names(self) -> list[str]:
        return []

    def __getitem__(self, name: str) -> Failing:
        return Failing(name, self.error)


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (OperationFailure("operation exceeded time limit", code=50), "narrow it"),
        (ServerSelectionTimeoutError("db1:27017: connection refused"), "connection refused"),
    ],
)
def test_driver_errors_are_503_pages(error: Exception, says: str) -> None:
    with TestClient(app(Database(error), query_budget_ms=100)) as console:
        for url in ["/timers?kind=TIMER", "/", "/timer?id=x", "/dead", "/nodes"]:
            page = console.get(url)
            assert page.status_code == 503, url
            assert says in page.text, url
