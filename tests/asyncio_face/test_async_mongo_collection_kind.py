"""``AsyncMongoScheduler`` given a synchronous pymongo ``Collection`` is a ``TypeError`` at
construction, naming ``AsyncMongoClient`` (it was accepted, and failed at its first awaited
call); mongomock's collections, which the async unit tests use, are still accepted."""

from __future__ import annotations

import pytest

pymongo = pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from flowsched import AsyncMongoScheduler, ManualClock  # noqa: E402


def test_a_synchronous_collection_is_refused_at_construction() -> None:
    # MongoClient connects lazily: no server is needed to build the collection.
    client: pymongo.MongoClient = pymongo.MongoClient("mongodb://127.0.0.1:9", connect=False)
    try:
        with pytest.raises(TypeError, match="AsyncMongoClient") as caught:
            AsyncMongoScheduler(client["shop"]["timers"], clock=ManualClock())
    finally:
        client.close()
    assert "'shop.timers'" in str(caught.value) and "MongoScheduler" in str(caught.value)


def test_an_async_collection_and_a_mongomock_one_are_accepted() -> None:
    client = pymongo.AsyncMongoClient("mongodb://127.0.0.1:9", connect=False)
    AsyncMongoScheduler(client["shop"]["timers"], clock=ManualClock())
    AsyncMongoScheduler(mongomock.MongoClient()["shop"]["timers"], clock=ManualClock())
