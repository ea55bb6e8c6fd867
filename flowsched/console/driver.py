"""Internal: one async face over a MongoDB collection: pymongo's async driver, or a sync stand-in.

The console runs its reads with ``pymongo.AsyncMongoClient``. A collection of the sync driver
(or mongomock, in tests) works too: its calls run in a worker thread, so a page never blocks
the event loop. Every read carries a time budget (``maxTimeMS``): the server stops a query
that would take longer, and the page says so instead of waiting on a scan.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio.to_thread

from flowsched.console.queries import FindSpec
from flowsched.errors import SchedulerUnavailable

__all__ = ["AsyncCollection", "LoopClient", "LoopCollection", "LoopDatabase"]

T = TypeVar("T")

_MAX_TIME_EXPIRED = 50


class LoopClient:
    """One ``pymongo.AsyncMongoClient`` per event loop, made on first use by ``connect``.

    The async driver's client belongs to the loop it first ran on; on another it raises
    "Cannot use AsyncMongoClient in different event loop". A host may serve requests on a
    new loop (a test client used without ``with``, a server started again in one process),
    so each loop gets a client of its own. :meth:`close` closes the running loop's."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._first: Any = connect()  # made now: a bad URI fails here, not on a request
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def current(self) -> Any:
        """The running loop's client (the first loop gets the one made at start)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._first if self._first is not None else self._connect()
            self._first = None
            self._clients[loop] = client
        return client

    async def close(self) -> None:
        """Close the running loop's client, if it has one (the others went with their loops)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()


class LoopDatabase:
    """Database ``name`` of a :class:`LoopClient`: ``database[collection]`` as for a driver."""

    def __init__(self, client: LoopClient, name: str) -> None:
        self.client = client
        self.name = name

    def __getitem__(self, collection: str) -> LoopCollection:
        return LoopCollection(self.client, self.name, collection)


class LoopCollection:
    """Collection ``database.name`` of a :class:`LoopClient`, on the running loop."""

    def __init__(self, client: LoopClient, database: str, name: str) -> None:
        self.client = client
        self.database = database
        self.name = name

    def current(self) -> Any:
        """The driver's ``AsyncCollection`` on the running loop's client."""
        return self.client.current()[self.database][self.name]


class AsyncCollection:
    """``raw`` (an ``AsyncCollection`` of the async driver, a :class:`LoopCollection`, or a
    sync collection) as coroutines.

    ``scrub`` removes secrets from driver messages; ``budget_ms`` bounds every read."""

    def __init__(self, raw: Any, scrub: Callable[[object], str], budget_ms: int) -> None:
        self._raw = raw
        self.name: str = raw.name
        self._scrub = scrub
        self._budget = budget_ms
        self._async = isinstance(raw, LoopCollection) or _is_async(raw)

    @property
    def raw(self) -> Any:
        """The driver's collection to call (on the running loop's client, for a URI)."""
        raw = self._raw
        return raw.current() if isinstance(raw, LoopCollection) else raw

    async def find(self, spec: FindSpec, projection: Mapping[str, Any] | None = None) -> list[Any]:
        """The documents of ``spec``, walking its index."""

        def cursor() -> Any:
            found = self.raw.find(spec.filter, projection).sort(spec.sort)
            if spec.hint is not None:
                found = found.hint(spec.hint)
            return found.limit(spec.limit).max_time_ms(self._budget)

        if self._async:
            return list(await self._guard(lambda: cursor().to_list()))
        return list(await self._sync(lambda: list(cursor())))

    async def explain(self, spec: FindSpec) -> dict[str, Any]:
        """The server's plan for ``spec`` (used by the bench to show no COLLSCAN)."""

        def cursor() -> Any:
            found = self.raw.find(spec.filter).sort(spec.sort)
            return (found.hint(spec.hint) if spec.hint else found).limit(spec.limit)

        if self._async:
            return dict(await self._guard(lambda: cursor().explain()))
        return dict(await self._sync(lambda: cursor().explain()))

    async def find_one(self, query: Mapping[str, Any]) -> Any:
        """One document matching ``query`` (by ``_id`` in every caller), or ``None``."""
        if self._async:
            return await self._guard(lambda: self.raw.find_one(dict(query)))
        return await self._sync(lambda: self.raw.find_one(dict(query)))

    async def aggregate(
        self, pipeline: Sequence[Mapping[str, Any]], hint: str | None = None
    ) -> list[Any]:
        """The result of one aggregation (its ``$match`` walking index ``hint``, if given)."""
        options: dict[str, Any] = {"maxTimeMS": self._budget}
        if hint is not None:
            options["hint"] = hint
        if self._async:

            async def run() -> list[Any]:
                cursor = await self.raw.aggregate(list(pipeline), **options)
                return list(await cursor.to_list())

            return list(await self._guard(run))
        return list(await self._sync(lambda: list(self.raw.aggregate(list(pipeline), **options))))

    async def insert_one(self, document: Mapping[str, Any]) -> None:
        """Insert ``document`` (the driver's ``DuplicateKeyError`` is raised unchanged)."""
        if self._async:
            await self._guard(lambda: self.raw.insert_one(dict(document)), writes=True)
        else:
            await self._sync(lambda: self.raw.insert_one(dict(document)), writes=True)

    async def delete_one(self, query: Mapping[str, Any]) -> int:
        """Delete one document matching ``query``; how many went (0 or 1)."""
        if self._async:
            result = await self._guard(lambda: self.raw.delete_one(dict(query)))
        else:
            result = await self._sync(lambda: self.raw.delete_one(dict(query)))
        return int(result.deleted_count)

    async def update_one(self, query: Mapping[str, Any], update: Mapping[str, Any]) -> int:
        """Update one document matching ``query``; how many matched (0 or 1)."""
        if self._async:
            result = await self._guard(lambda: self.raw.update_one(dict(query), dict(update)))
        else:
            result = await self._sync(lambda: self.raw.update_one(dict(query), dict(update)))
        return int(result.matched_count)

    async def count(self, query: Mapping[str, Any], limit: int, hint: str | None = None) -> int:
        """How many documents match ``query``, counting at most ``limit``."""
        options: dict[str, Any] = {"limit": limit, "maxTimeMS": self._budget}
        if hint is not None:
            options["hint"] = hint
        return int(await self._call(lambda: self.raw.count_documents(dict(query), **options)))

    async def estimated_count(self) -> int:
        """The collection's document count from its metadata (no scan)."""
        return int(await self._call(lambda: self.raw.estimated_document_count()))

    async def delete_many(self, query: Mapping[str, Any]) -> int:
        """Delete every document matching ``query``; how many went."""
        result = await self._call(lambda: self.raw.delete_many(dict(query)))
        return int(result.deleted_count)

    async def update_many(self, query: Mapping[str, Any], update: Mapping[str, Any]) -> int:
        """Update every document matching ``query``; how many matched."""
        result = await self._call(lambda: self.raw.update_many(dict(query), dict(update)))
        return int(result.matched_count)

    async def insert_many(self, documents: Sequence[Mapping[str, Any]]) -> set[Any]:
        """Insert ``documents`` (unordered: one duplicate stops no other); the ids stored."""
        from pymongo.errors import BulkWriteError

        wanted = [dict(d) for d in documents]
        try:
            await self._call(lambda: self.raw.insert_many(wanted, ordered=False), writes=True)
        except BulkWriteError as exc:
            failed = {wanted[e["index"]]["_id"] for e in exc.details.get("writeErrors", [])}
            return {d["_id"] for d in wanted} - failed
        return {d["_id"] for d in wanted}

    async def index_named(self, keys: Sequence[tuple[str, int]]) -> str | None:
        """The name of an index on exactly ``keys``, or ``None``."""

        async def run_async() -> list[Any]:
            cursor = await self.raw.list_indexes()
            return list(await cursor.to_list())

        if self._async:
            found = await self._guard(run_async)
        else:
            found = await self._sync(lambda: list(self.raw.list_indexes()))
        for index in found:
            if [(k, int(v)) for k, v in dict(index["key"]).items()] == [tuple(k) for k in keys]:
                return str(index["name"])
        return None

    async def _call(self, call: Callable[[], Any], writes: bool = False) -> Any:
        if self._async:
            return await self._guard(call, writes)
        return await self._sync(call, writes)

    async def create_index(self, keys: list[tuple[str, int]], name: str) -> None:
        """Create index ``name`` on ``keys`` (idempotent)."""
        if self._async:
            await self._guard(lambda: self.raw.create_index(keys, name=name))
        else:
            await self._sync(lambda: self.raw.create_index(keys, name=name))

    async def _sync(self, call: Callable[[], T], writes: bool = False) -> Any:
        async def run() -> T:
            return await anyio.to_thread.run_sync(call)

        return await self._guard(run, writes)

    async def _guard(self, call: Callable[[], Any], writes: bool = False) -> Any:
        try:
            return await call()
        except Exception as exc:
            raise self._translated(exc, writes) from None

    def _translated(self, exc: Exception, writes: bool) -> Exception:
        from pymongo.errors import (
            BulkWriteError,
            DuplicateKeyError,
            OperationFailure,
            PyMongoError,
        )

        if writes and isinstance(exc, DuplicateKeyError | BulkWriteError):
            return exc
        if isinstance(exc, OperationFailure) and exc.code == _MAX_TIME_EXPIRED:
            return SchedulerUnavailable(
                f"the query on {self.name} took longer than {self._budget} ms and was stopped:"
                " narrow it with an id or flow prefix (both walk an index)"
            )
        if isinstance(exc, PyMongoError):
            details = getattr(exc, "details", None)
            if isinstance(details, dict) and isinstance(details.get("errmsg"), str):
                reason: object = f"{details['errmsg']} ({details.get('codeName', 'no code')})"
            else:  # the driver appends its timeouts and topology: keep the first reason
                reason = re.split(r" \(configured timeouts|, Timeout: ", str(exc))[0]
            text = " ".join(self._scrub(reason).split())[:300]
            return SchedulerUnavailable(f"MongoDB did not answer the query on {self.name}: {text}")
        return exc


def _is_async(raw: Any) -> bool:
    try:
        from pymongo.asynchronous.collection import AsyncCollection as DriverCollection
    except ImportError:  # an older driver: only sync collections
        return False
    return isinstance(raw, DriverCollection)
