"""Internal: the MongoDB procedures without I/O, and the two drivers that run them.

A procedure (a claim, a settlement, a lease renewal, a quarantine move, ...) is written once,
as a generator that ``yield``\\ s the database operations it needs (:class:`Call`,
:class:`Find`) and receives each one's result (or has its error thrown in, so ``try``/
``except`` around a ``yield`` works as around a call). What the procedure does with the
results - the interpretation - lives in the generator; how the operations reach the server
lives in a driver:

* :func:`drive` runs a procedure on pymongo's synchronous ``Collection`` (or mongomock):
  ``steps.send(collection.<op>(...))`` - plain calls in the calling thread, no event loop;
* :func:`drive_async` runs the same procedure on pymongo's ``AsyncCollection``:
  ``steps.send(await collection.<op>(...))``. A collection whose calls return plain values
  (mongomock) runs inline, which the fast async unit tests use.

A procedure with a long stretch of its own work between two operations (a claim turning
200 documents into claims) yields a :class:`Breather` between slices of it: nothing for the
synchronous driver, one turn of the event loop for the asyncio one, so that no single
callback holds the loop for the whole stretch.

An operation names its collection by role (``items``, ``dead``, ``quarantine``,
``settings``, ``nodes``): the attributes of :class:`~flowsched.mongo.store.TimerStore`, which
holds either kind of collection.

>>> def count_due(now):
...     found = yield Find("items", {"ready_at": {"$lte": now}}, {"_id": 1})
...     return len(found)
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # imported where used: a procedure's module needs no driver to import
    from pymongo import DeleteMany, DeleteOne, ReplaceOne, UpdateMany, UpdateOne

__all__ = [
    "Breather",
    "Call",
    "Counts",
    "Find",
    "Op",
    "Steps",
    "Together",
    "Write",
    "counted_write_steps",
    "drive",
    "drive_async",
    "write_steps",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """``<role collection>.<method>(*args, **kwargs)``: its result is sent back."""

    role: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Find:
    """A query read to the end as a list (``limit`` 0: no limit; a positive limit is also
    the batch size, so the first reply closes the cursor: no ``getMore`` round trip)."""

    role: str
    filter: Mapping[str, Any]
    projection: Mapping[str, Any] | None = None
    sort: Sequence[tuple[str, int]] | None = None
    limit: int = 0


@dataclass(frozen=True, slots=True)
class Breather:
    """Let other work run before going on (its result is ``None``). A cancellation of the
    asyncio driver's task at a pause is thrown into the procedure, which may give back what
    it holds before it lets the cancellation go on."""


@dataclass(frozen=True, slots=True)
class Together:
    """The writes of several collections in one round trip: MongoDB 8's client-level
    ``bulkWrite`` command, unordered (``ordered``: in order, stopping at the first write the
    server refuses), with the first collection's write concern
    (:mod:`flowsched.mongo.together`). Its result: the :class:`Counts` of each part, in
    order. A server older than 8.0: pymongo's ``InvalidOperation``."""

    parts: tuple[tuple[str, tuple[Write, ...]], ...]
    ordered: bool = False

    def operations(self, store: Collections) -> list[Any]:
        """The parts' writes as namespaced operations of ``MongoClient.bulk_write``."""
        return [
            write.operation(store.collection(role).full_name)
            for role, writes in self.parts
            for write in writes
        ]

    def counts(self, result: Any) -> list[Counts]:
        """What each part did, from a verbose ``ClientBulkWriteResult``."""
        updates, deletes = result.update_results, result.delete_results
        counts, first = [], 0
        for _, writes in self.parts:
            span = range(first, first + len(writes))
            first += len(writes)
            counts.append(
                Counts(
                    sum(updates[n].matched_count for n in span if n in updates),
                    sum(updates[n].modified_count for n in span if n in updates),
                    sum(deletes[n].deleted_count for n in span if n in deletes),
                )
            )
        return counts


Op = Call | Find | Breather | Together
Steps = Generator[Op, Any, T]
"""A procedure: yields operations, receives their results, returns its own."""


class Collections(Protocol):
    """What a driver reads the collections from (a TimerStore)."""

    def collection(self, role: str) -> Any: ...


def _find(collection: Any, op: Find) -> Any:
    cursor = collection.find(op.filter, op.projection)
    if op.sort:
        cursor = cursor.sort(list(op.sort))
    if op.limit:
        cursor = cursor.limit(op.limit).batch_size(op.limit)
    return cursor


def _start(store: Collections, op: Call | Find | Together) -> Any:
    if isinstance(op, Together):  # with the first collection's write concern
        first = store.collection(op.parts[0][0])
        operations = op.operations(store)
        concern = {"write_concern": first.write_concern}
        return first.database.client.bulk_write(
            operations, ordered=op.ordered, verbose_results=True, **concern
        )
    collection = store.collection(op.role)
    if isinstance(op, Find):
        return _find(collection, op)
    return getattr(collection, op.method)(*op.args, **op.kwargs)


@dataclass(frozen=True, slots=True)
class _Returned:
    value: Any


def _resume(
    steps: Steps[Any], result: Any = None, error: BaseException | None = None
) -> Op | _Returned:
    """Both drivers: the procedure's next operation once it is sent ``result`` (or has
    ``error`` thrown in), or its return value."""
    try:
        return steps.send(result) if error is None else steps.throw(error)
    except StopIteration as stop:
        return _Returned(stop.value)


def drive(steps: Steps[T], store: Collections) -> T:
    """Run ``steps`` on synchronous collections; its return value."""
    op = _resume(steps)
    while not isinstance(op, _Returned):
        result, error = None, None
        if not isinstance(op, Breather):
            try:
                result = _start(store, op)
                if isinstance(op, Find):
                    result = list(result)
                elif isinstance(op, Together):
                    result = op.counts(result)
            except Exception as exc:  # into the procedure, which may handle it
                error = exc
        op = _resume(steps, result, error)
    value: T = op.value
    return value


async def drive_async(steps: Steps[T], store: Collections) -> T:
    """Run ``steps`` on asyncio collections (``AsyncCollection``; plain ones inline)."""
    op = _resume(steps)
    while not isinstance(op, _Returned):
        result, error = None, None
        if isinstance(op, Breather):
            try:
                await asyncio.sleep(0)
            except BaseException as exc:  # cancelled: the procedure gives back, re-raises
                error = exc
        else:
            try:
                result = await _result(_start(store, op), op)
            except Exception as exc:
                error = exc
        op = _resume(steps, result, error)
    value: T = op.value
    return value


async def _result(started: Any, op: Call | Find | Together) -> Any:
    """What an asyncio (or an inline, mongomock) collection answered to ``op``."""
    if isinstance(op, Find):
        to_list = getattr(started, "to_list", None)
        if to_list is not None and inspect.iscoroutinefunction(to_list):
            return await to_list(None)
        return list(started)
    if inspect.isawaitable(started):
        started = await started
    return op.counts(started) if isinstance(op, Together) else started


@dataclass(frozen=True, slots=True)
class Write:
    """One write of a batch: delete (no ``update``/``replacement``), update, or replace."""

    filter: Mapping[str, Any]
    update: Mapping[str, Any] | None = None
    replacement: Mapping[str, Any] | None = None
    upsert: bool = False
    many: bool = False  # a delete or update of every document the filter matches

    def operation(
        self, namespace: str | None = None
    ) -> DeleteOne | DeleteMany | UpdateOne | UpdateMany | ReplaceOne[Any]:
        """This write as a pymongo operation (``namespace``: of a client-level bulk write)."""
        from pymongo import DeleteMany, DeleteOne, ReplaceOne, UpdateMany, UpdateOne

        at: dict[str, Any] = {} if namespace is None else {"namespace": namespace}
        if self.replacement is not None:
            return ReplaceOne(self.filter, self.replacement, upsert=self.upsert, **at)
        if self.update is not None and self.many:
            return UpdateMany(self.filter, self.update, upsert=self.upsert, **at)
        if self.update is not None:
            return UpdateOne(self.filter, self.update, upsert=self.upsert, **at)
        if self.many:
            return DeleteMany(self.filter, **at)
        return DeleteOne(self.filter, **at)


@dataclass(frozen=True, slots=True)
class Counts:
    """What a batch of writes did: documents matched and modified by its updates and
    replacements, and deleted by its deletes (totals: a bulk write says no more)."""

    matched: int = 0
    modified: int = 0
    deleted: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.matched + other.matched,
            self.modified + other.modified,
            self.deleted + other.deleted,
        )


def write_steps(role: str, writes: Sequence[Write], bulk: bool) -> Steps[int]:
    """Apply ``writes`` unordered in one ``bulk_write`` (one round trip); return how many
    documents the updates and replacements modified (:func:`counted_write_steps`)."""
    return (yield from counted_write_steps(role, writes, bulk)).modified


def counted_write_steps(
    role: str, writes: Sequence[Write], bulk: bool, *, copies: bool = False
) -> Steps[Counts]:
    """Apply ``writes`` unordered in one ``bulk_write`` (one round trip); what they did.

    Stand-ins that are not pymongo collections (``bulk`` false: mongomock 4.3 cannot take
    pymongo 4.9+ bulk operations) get one call per write instead: same effect, more calls.
    ``copies``: and each document its own copy of the values set (mongomock sets one dict
    object into every document an ``update_many`` matches, so a later change of a field
    inside it, ``claim.lease_until``, would change them all): an ``update_many`` becomes a
    ``find`` and one ``update_one`` per document found."""
    if not writes:
        return Counts()
    if bulk:
        operations = [w.operation() for w in writes]
        result = yield Call(role, "bulk_write", (operations,), {"ordered": False})
        return Counts(
            _count(result, "matched"), int(result.modified_count), _count(result, "deleted")
        )
    matched = modified = deleted = 0
    for w in writes:
        if w.update is not None and w.many and copies:
            for doc in (yield Find(role, w.filter, {"_id": 1})):
                one = ({**w.filter, "_id": doc["_id"]}, copy.deepcopy(w.update))
                result = yield Call(role, "update_one", one)
                matched += _count(result, "matched")
                modified += result.modified_count
            continue
        if w.replacement is not None:
            call = Call(role, "replace_one", (w.filter, w.replacement), {"upsert": w.upsert})
        elif w.update is not None:
            update = copy.deepcopy(w.update) if copies else w.update
            method = "update_many" if w.many else "update_one"
            call = Call(role, method, (w.filter, update), {"upsert": w.upsert})
        else:
            call = Call(role, "delete_many" if w.many else "delete_one", (w.filter,))
        result = yield call
        if w.replacement is not None or w.update is not None:
            matched += _count(result, "matched")
            modified += result.modified_count
        else:
            deleted += _count(result, "deleted")
    return Counts(matched, modified, deleted)


def _count(result: Any, what: str) -> int:
    """``result.<what>_count`` (0 from a stand-in's result that does not say)."""
    return int(getattr(result, f"{what}_count", 0))
