"""Internal: the checks of :class:`~flowsched.MongoScheduler`'s arguments (and of a payload
BSON cannot hold).

The same bounds ``MongoScheduler.from_config`` applies to its keys (longer waits overflow the
platform's timeouts, or a lease never ends; a larger batch or pool is beyond what a node can
hold). Each names the argument and the bad value.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import bson
from pymongo.collection import Collection

from flowsched.config.scheduler_settings import (
    LONGEST_OP_TIMEOUT,
    LONGEST_SETTING,
    MAX_BATCH_SIZE,
    MAX_BUCKETS,
    MAX_WORKERS,
)
from flowsched.limits import check_id
from flowsched.records import ScheduleItem

__all__ = [
    "check_arguments",
    "check_async_collection",
    "check_bson_payload",
    "check_count",
    "check_positive",
    "check_served",
    "storable_id",
]


def storable_id(value: object) -> bool:
    """Whether ``value`` is an id an item can have (:func:`check_id`); others match nothing."""
    try:
        check_id(value)
    except ValueError:
        return False
    return True


def check_positive(name: str, value: timedelta, most: timedelta) -> None:
    if not isinstance(value, timedelta) or not timedelta(0) < value <= most:
        raise ValueError(
            f"MongoScheduler {name} must be a positive timedelta of at most {most.days} "
            f"day(s) (got {value!r})"
        )


def check_served(served: Iterable[int] | None, buckets: int) -> tuple[int, ...] | None:
    if served is None:
        return None
    given = list(served) if isinstance(served, Iterable) and not isinstance(served, str) else []
    if not given or any(
        not isinstance(b, int) or isinstance(b, bool) or not 0 <= b < buckets for b in given
    ):
        raise ValueError(
            f"MongoScheduler serve_buckets must be a non-empty set of buckets in "
            f"0..{buckets - 1} (buckets={buckets}), got {served!r}"
        )
    return tuple(sorted(set(given)))


def check_count(name: str, value: int, most: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"MongoScheduler {name} must be an integer >= 1 (got {value!r})")
    if most is not None and value > most:
        raise ValueError(f"MongoScheduler {name} must be at most {most:,} (got {value!r})")


def check_bson_payload(item: ScheduleItem, document: dict[str, Any]) -> None:
    """``ValueError`` naming the item if its payload cannot be stored as BSON: JSON allows
    what BSON does not (integers beyond 64 bits); said before writing."""
    try:
        bson.encode({"payload": document["payload"]})
    except (OverflowError, bson.errors.BSONError) as exc:
        raise ValueError(
            f"ScheduleItem {item.id!r}: payload cannot be stored in MongoDB: {exc}"
        ) from None


def check_async_collection(collection: object) -> None:
    """``TypeError`` if ``collection`` is a synchronous pymongo ``Collection``: an
    ``AsyncMongoScheduler`` awaits every call, and a synchronous collection's calls return
    results, not awaitables (it would fail at its first write, or block the loop). Said at
    construction, naming the client to use. (mongomock's collections, which the asyncio
    driver runs inline for tests, are not pymongo's and pass.)"""
    if isinstance(collection, Collection):
        raise TypeError(
            f"AsyncMongoScheduler needs a pymongo AsyncCollection, from "
            f"pymongo.AsyncMongoClient(uri, tz_aware=True)[database][collection]; got the "
            f"synchronous Collection {collection.full_name!r} (from MongoClient): use an "
            "AsyncMongoClient, or MongoScheduler for a synchronous collection"
        )


def check_arguments(
    poll_interval: timedelta,
    lease: timedelta,
    op_timeout: timedelta,
    batch_size: int,
    workers: int,
    buckets: int,
    serve_buckets: Iterable[int] | None,
) -> tuple[int, ...] | None:
    """Check a :class:`~flowsched.MongoScheduler`'s arguments against the bounds
    ``from_config`` applies (longer waits overflow the platform's timeouts, or a lease never
    ends; a larger batch or pool is beyond what a node can hold); the buckets it serves."""
    check_positive("poll_interval", poll_interval, LONGEST_SETTING)
    check_positive("lease", lease, LONGEST_SETTING)
    check_positive("op_timeout", op_timeout, LONGEST_OP_TIMEOUT)
    check_count("batch_size", batch_size, MAX_BATCH_SIZE)
    check_count("workers", workers, MAX_WORKERS)
    check_count("buckets", buckets, MAX_BUCKETS)
    return check_served(serve_buckets, buckets)
