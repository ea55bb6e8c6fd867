"""Driver trouble becomes a page that says what happened: a query over its time budget asks
for a narrower filter (503), an unreachable server says so, neither is a 500."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError
from starlette.testclient import TestClient

from flowsched.console import app
from flowsched.console.driver import LoopClient


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

    def list_indexes(self, *args: Any) -> Any:
        raise self.error

    def count_documents(self, *args: Any, **options: Any) -> Any:
        raise self.error

    def estimated_document_count(self, *args: Any, **options: Any) -> Any:
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


def test_a_loop_client_gives_each_event_loop_its_own_client() -> None:
    made: list[object] = []

    class Client:
        closed = False

        def __init__(self) -> None:
            made.append(self)

        async def close(self) -> None:
            self.closed = True

    clients = LoopClient(Client)
    assert len(made) == 1  # made at once: a bad URI fails when the app is built

    async def twice() -> tuple[object, object]:
        return clients.current(), clients.current()

    first = asyncio.run(twice())
    second = asyncio.run(twice())
    assert first[0] is first[1] is made[0]  # the first loop gets the client made at start
    assert second[0] is second[1] is made[1]  # a new loop, a new client
    asyncio.run(clients.close())  # a loop with no client of its own: nothing to close
    assert not any(client.closed for client in made)

    async def use_then_close() -> object:
        client = clients.current()
        await clients.close()
        return client

    assert asyncio.run(use_then_close()).closed  # type: ignore[attr-defined]
