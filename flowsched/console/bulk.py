"""Internal: work on many timers at once: cancel by filter, cancel a flow, requeue a handler's
dead letters.

Each is a :class:`Bulk`: :func:`preview` counts what it would touch (one count), and
:func:`run` does it in batches of :data:`BATCH`, yielding the running total after each. On
MongoDB a batch is two round trips whatever its size: the next ids (an indexed ``find`` in
``_id`` order from the last one seen), then one ``delete_many`` of the filter within the
range of those ids (a timer that no longer matches is left alone; the range, not a list of
ids, keeps the delete one index range on every server); a requeue batch
is a ``find`` of dead letters, one unordered ``insert_many`` of their fresh timers and one
``delete_many`` of the dead letters whose timer went in (one already scheduled again stays a
dead letter). Over an in-memory scheduler each id goes through the scheduler's own calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from flowsched.console.memory_source import MemorySource, _maybe
from flowsched.console.queries import ID_INDEX, FindSpec, TimerQuery
from flowsched.console.source import COUNT_LIMIT, MongoSource
from flowsched.console.store_source import StoreSource
from flowsched.mongo.documents import (
    bucket_of,
    dead_letter_from_document,
    item_document,
    new_generation,
)

Source = MongoSource | MemorySource | StoreSource

__all__ = ["BATCH", "Bulk", "Progress", "preview", "run"]

BATCH = 2000
"""Ids per batch (one ``$in`` list)."""

Verb = Literal["cancel", "cancel_flow", "requeue"]


@dataclass(frozen=True, slots=True)
class Bulk:
    """One bulk action: ``cancel`` the timers of ``query``, ``cancel_flow`` of ``flow_id``, or
    ``requeue`` the dead letters of ``handler`` (or of ``kind``, for kind-routed ones)."""

    verb: Verb
    query: TimerQuery | None = None
    flow_id: str | None = None
    handler: str | None = None
    kind: str | None = None

    def describe(self) -> str:
        """What it works on, in words (shown on its pages and kept in the audit)."""
        if self.verb == "cancel":
            assert self.query is not None
            return f"cancel the timers matching {self.query.describe()}"
        if self.verb == "cancel_flow":
            return f"cancel every timer of flow {self.flow_id}"
        target = f"handler {self.handler}" if self.handler else f"kind {self.kind}"
        return f"requeue the dead letters of {target}"

    def dead_filter(self) -> dict[str, Any]:
        if self.handler is not None:
            return {"handler": self.handler}
        return {"kind": self.kind, "handler": None}

    def timers_filter(self, now: datetime) -> dict[str, Any]:
        if self.verb == "cancel_flow":
            return {"flow_id": self.flow_id}
        assert self.query is not None
        return self.query.filter(now)


@dataclass(slots=True)
class Progress:
    """After a batch: how many were done so far, and the ids touched so far."""

    done: int = 0
    ids: list[str] = field(default_factory=list)
    skipped: int = 0
    """Dead letters not requeued (their id is scheduled again since they died)."""


async def preview(source: Source, bulk: Bulk, now: datetime) -> int:
    """How many items ``bulk`` would touch now (at most :data:`COUNT_LIMIT`)."""
    if isinstance(source, StoreSource):
        return len(await source.bulk_ids(bulk, now))
    if isinstance(source, MongoSource):
        if bulk.verb == "requeue":
            return await source.dead.count(bulk.dead_filter(), COUNT_LIMIT)
        return await source.items.count(bulk.timers_filter(now), COUNT_LIMIT)
    return len(await _memory_ids(source, bulk, now))


async def run(source: Source, bulk: Bulk, now: datetime) -> AsyncIterator[Progress]:
    """Do ``bulk`` in batches; the progress after each (the last one is the total)."""
    progress = Progress()
    if isinstance(source, StoreSource):
        async for step in _store_run(source, bulk, now, progress):
            yield step
        return
    if isinstance(source, MemorySource):
        async for step in _memory_run(source, bulk, now, progress):
            yield step
        return
    if bulk.verb == "requeue":
        async for step in _requeue_mongo(source, bulk, progress):
            yield step
        return
    wanted = bulk.timers_filter(now)
    last: Any = None
    while True:
        ids = await _next_ids(source.items, wanted, last)
        if not ids:
            return
        last = ids[-1]
        span = {"_id": {"$gte": ids[0], "$lte": last}}
        progress.done += await source.items.delete_many(merged(wanted, span, replace_id=True))
        progress.ids += [str(i) for i in ids]
        yield progress


async def _next_ids(collection: Any, wanted: dict[str, Any], last: Any) -> list[Any]:
    query = wanted if last is None else merged(wanted, {"_id": {"$gt": last}})
    spec = FindSpec(query, [("_id", 1)], ID_INDEX, BATCH)
    return [doc["_id"] for doc in await collection.find(spec, {"_id": 1})]


def merged(
    wanted: dict[str, Any], extra: dict[str, Any], *, replace_id: bool = False
) -> dict[str, Any]:
    """``wanted`` and ``extra`` both holding, as one flat filter where their fields differ
    (a server plans a flat filter on ``_id`` as an index range more readily than the same
    under ``$and``), else under ``$and``. ``replace_id``: ``extra``'s ``_id`` range lies
    inside ``wanted``'s (its ends matched ``wanted``), so it stands for both."""
    parts = wanted["$and"] if list(wanted) == ["$and"] else [wanted] if wanted else []
    flat = dict(extra)
    for part in parts:
        for key, value in part.items():
            if key == "_id" and replace_id and key in extra:
                continue
            if key in flat:
                return {"$and": [wanted, extra]}
            flat[key] = value
    return flat


async def _requeue_mongo(
    source: MongoSource, bulk: Bulk, progress: Progress
) -> AsyncIterator[Progress]:
    buckets = await source.buckets() or 1
    now = source._clock.now()
    last: Any = None
    while True:
        wanted = bulk.dead_filter()
        query = wanted if last is None else merged(wanted, {"_id": {"$gt": last}})
        spec = FindSpec(query, [("_id", 1)], ID_INDEX, BATCH)
        letters = await source.dead.find(spec)
        if not letters:
            return
        last = letters[-1]["_id"]
        fresh = []
        for document in letters:
            try:
                old = dead_letter_from_document(document).item
            except ValueError:
                progress.skipped += 1  # a malformed dead letter: left for a person to read
                continue
            moved = old.moved(now, old.previous)
            fresh.append(item_document(moved, new_generation(), bucket=bucket_of(old.id, buckets)))
        stored = await source.items.insert_many(fresh) if fresh else set()
        progress.skipped += len(fresh) - len(stored)
        if stored:
            gone = {"_id": {"$in": sorted(stored, key=str)}}
            progress.done += await source.dead.delete_many(gone)
            progress.ids += sorted(str(i) for i in stored)
        yield progress


async def _memory_ids(source: MemorySource, bulk: Bulk, now: datetime) -> list[str]:
    if bulk.verb == "requeue":
        letters = await source._letters()
        return [
            d.item.id
            for d in letters
            if (bulk.handler is not None and d.item.handler == bulk.handler)
            or (bulk.handler is None and d.item.handler is None and d.item.kind.value == bulk.kind)
        ]
    if bulk.verb == "cancel_flow":
        return [
            str(d["_id"]) for d in await source._documents() if d.get("flow_id") == bulk.flow_id
        ]
    assert bulk.query is not None
    return [str(d["_id"]) for d in await source._matching(bulk.query, now)]


async def _memory_run(
    source: MemorySource, bulk: Bulk, now: datetime, progress: Progress
) -> AsyncIterator[Progress]:
    ids = await _memory_ids(source, bulk, now)
    scheduler = source._scheduler
    for first in range(0, len(ids), BATCH):
        batch: Sequence[str] = ids[first : first + BATCH]
        for item_id in batch:
            call = scheduler.requeue if bulk.verb == "requeue" else scheduler.cancel
            if await _maybe(call(item_id)):
                progress.done += 1
                progress.ids.append(item_id)
            else:
                progress.skipped += 1
        yield progress


async def _store_run(
    source: StoreSource, bulk: Bulk, now: datetime, progress: Progress
) -> AsyncIterator[Progress]:
    """A bulk action over the store interface: one store call per item, in batches."""
    ids = await source.bulk_ids(bulk, now)
    for first in range(0, len(ids), BATCH):
        for item_id in ids[first : first + BATCH]:
            if await source.bulk_one(bulk.verb, item_id):
                progress.done += 1
                progress.ids.append(item_id)
            else:
                progress.skipped += 1
        yield progress
