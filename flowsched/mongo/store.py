"""Internal: MongoDB timer storage — the collections and one-round-trip operations on them.

* ``<name>``: one document per scheduled item (see :mod:`flowsched.mongo.documents`);
  indexes ``claim_by_route_bucket`` = ``(route, bucket, ready_at)`` for the sweep and
  ``flow_id_sparse`` (items of a flow only) for ``cancel_flow``, ``due_id`` = ``(due, _id)``
  for ``timers()``. (Versions before routing
  made ``claim`` = ``(kind, ready_at)``; it is no longer used: ``flowsched timers migrate
  --drop-legacy-index`` drops it.)
* ``<name>_dead``: dead letters, ``_id`` = item id, indexes on ``dead_at`` and ``due_id``.
* ``<name>_quarantine``: malformed documents moved aside with the reason.
* ``<name>_history``: delivery history, one document per item id, TTL index on ``expires_at``
  (see :mod:`flowsched.mongo.history`).
* ``<name>_nodes``: live nodes and the routes they serve (see :mod:`flowsched.mongo.nodes`).
* ``<name>_settings``: what the nodes of the collection share - ``{_id: "buckets", value:
  <n>, recorded_by: <node>}``, written by the first node to use the collection (see
  :meth:`TimerStore.check_buckets`), and ``{_id: "audit", next_at: <date>, by: <node>}``,
  whose turn the poison audit is (see :class:`flowsched.mongo.quarantine.Audit`).

Every method is one server round trip (``ensure_indexes`` aside, and a cancel or replace that
meets a started delivery: :mod:`~flowsched.mongo.keep_started`), raises the driver's errors
unchanged and retries nothing: callers decide (bounded wait for user calls, back off, go on).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from bson.codec_options import DatetimeConversion
from pymongo import (
    ASCENDING,
    ReturnDocument,
)
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from flowsched.errors import ConfigError
from flowsched.mongo import keep_started as keeping
from flowsched.mongo.commands import Call, Find, Steps, Write, drive, write_steps
from flowsched.mongo.documents import bucket_of, truncate_ms
from flowsched.mongo.indexes import (  # re-exported: the names the mongo modules import
    CLAIM_INDEX,
    CLAIM_INDEX_KEYS,
    DUE_INDEX,
    DUE_INDEX_KEYS,
    LEGACY_CLAIM_INDEX,
    index_steps,
    recorded_buckets,
)
from flowsched.mongo.server_clock import ServerClock
from flowsched.mongo.together import Capability, encodes_alike

__all__ = [
    "CLAIM_INDEX",
    "CLAIM_INDEX_KEYS",
    "DUE_INDEX",
    "DUE_INDEX_KEYS",
    "LEGACY_CLAIM_INDEX",
    "Doc",
    "TimerStore",
    "Write",
    "recorded_buckets",
]

Doc = Mapping[str, Any]
T = TypeVar("T")


_DUPLICATE_KEY = 11000

ID_CHUNK = 25
"""Most ids one operation of a batch write names (``_id`` in a list): a batch over more
ids is split into several operations of one ``bulk_write`` (the same single round trip).
A server that matches each document against the whole list pays for the list's length
per document; on the wire server measured here a 100-id delete cost 0.17 ms a document,
four 25-id deletes in one bulk write 0.085 ms. On MongoDB each operation is an ``_id``
index lookup either way."""


def id_chunks(item_ids: Sequence[Any]) -> list[list[Any]]:
    """``item_ids`` in order, in lists of at most :data:`ID_CHUNK`."""
    ids = list(item_ids)
    return [ids[n : n + ID_CHUNK] for n in range(0, len(ids), ID_CHUNK)]


def _one_or_in(buckets: list[int]) -> Any:
    return buckets[0] if len(buckets) == 1 else {"$in": buckets}


def _tolerant(collection: Any) -> Any:
    """``collection`` reading every document it can hold: a date beyond Python's range comes
    back as ``DatetimeMS`` and invalid UTF-8 as U+FFFD, instead of failing the whole query
    (and so every sweep) on one bad document. The checks then find and quarantine it."""
    if not isinstance(collection, Collection | AsyncCollection):
        return collection  # a stand-in (mongomock) that has no such codec options
    options = collection.codec_options.with_options(
        datetime_conversion=DatetimeConversion.DATETIME_AUTO,
        unicode_decode_error_handler="replace",
    )
    return collection.with_options(codec_options=options)


def _marker(record: Doc, refusal: str) -> dict[str, Any]:
    """What is kept of a quarantine record the server would not store."""
    document = record.get("document")
    fields = sorted(map(str, document)) if isinstance(document, Mapping) else []
    return {
        "_id": record["_id"],
        "item_id": repr(record.get("item_id"))[:200],
        "document": None,
        "fields": fields,
        "reason": record.get("reason"),
        "node": record.get("node"),
        "quarantined_at": record.get("quarantined_at"),
        "not_kept": f"the original could not be stored: {refusal[:500]}",
    }


class MongoCollections:
    """MongoDB storage of timers: the items collection, its ``_dead`` and ``_quarantine`` ones."""

    def __init__(
        self,
        collection: Collection[Any] | AsyncCollection[Any],
        buckets: int = 1,
        served: Sequence[int] | None = None,
        node: str = "?",
        clock: ServerClock | None = None,
    ) -> None:
        self.items: Any = _tolerant(collection)
        self.node = node
        """Who this store works for (recorded beside the bucket count it records)."""
        self.buckets = buckets
        self.served: tuple[int, ...] = tuple(range(buckets) if served is None else served)
        """The buckets this node claims from (all, unless told otherwise)."""
        database: Any = collection.database
        self.database: Any = database
        """The items' database (operations on it name the role ``database``)."""
        # pymongo's bulk_write (mongomock 4.3 cannot take pymongo 4.9+ bulk operations).
        self.bulk = isinstance(collection, Collection | AsyncCollection)
        self.keep_started: keeping.KeepStarted | None = None  # set where a history is kept
        self.dead = database[f"{collection.name}_dead"]
        self.quarantine = database[f"{collection.name}_quarantine"]
        self.nodes = database[f"{collection.name}_nodes"]
        self.settings = database[f"{collection.name}_settings"]
        self.history = database[f"{collection.name}_history"]
        # Writes to several collections in one round trip (MongoDB 8.0+'s bulkWrite).
        self.together = Capability(self.bulk and encodes_alike(collection, self.history))
        self._indexed = False
        self.clock = clock  # stamps stored forms (stamped), once measured
        self._disagreement: ConfigError | None = None
        self._index_lock = threading.Lock()

    def collection(self, role: str) -> Any:
        """The collection an operation names by role (``items``, ``dead``, ...)."""
        return getattr(self, role)

    def run(self, steps: Steps[T]) -> T:
        """Run a procedure on this store's synchronous collections."""
        return drive(steps, self)

    @staticmethod
    def write(collection: Collection[Any], writes: Sequence[Write]) -> int:
        """Apply ``writes`` to ``collection`` (see :func:`write_steps`), synchronously."""
        bulk = isinstance(collection, Collection)
        return drive(write_steps("c", writes, bulk), _One(collection))

    def write_steps(self, role: str, writes: Sequence[Write]) -> Steps[int]:
        """Apply ``writes`` to the ``role`` collection (see :func:`write_steps`)."""
        return write_steps(role, writes, self.bulk)

    @property
    def name(self) -> str:
        return str(self.items.full_name)

    # -- the shard key: every filter on the items names the bucket -------------------------

    def bucket(self, item_id: object) -> int:
        return bucket_of(item_id, self.buckets)

    def key(self, item_id: object) -> dict[str, Any]:
        """The filter of one item: its ``_id`` and bucket (the shard key, both equal)."""
        return {"_id": item_id, "bucket": self.bucket(item_id)}

    def keys(self, item_ids: Sequence[Any]) -> dict[str, Any]:
        """The filter of several items: ``_id`` in them, bucket in theirs."""
        buckets = sorted({self.bucket(item_id) for item_id in item_ids})
        return {"_id": {"$in": list(item_ids)}, "bucket": _one_or_in(buckets)}

    def keyed(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """``query`` naming the bucket of the ids it selects by ``_id`` (an id or ``$in``),
        unless it names one already or selects otherwise: every filter on the items names
        the shard key, so mongos routes it to the shards that hold it."""
        ids = query.get("_id")
        if "bucket" in query or ids is None:
            return dict(query)
        if isinstance(ids, Mapping):
            if set(ids) != {"$in"}:
                return dict(query)
            return {**query, "bucket": self.keys(list(ids["$in"]))["bucket"]}
        return {**query, "bucket": self.bucket(ids)}

    def every_bucket(self) -> Any:
        """The bucket condition of a query that is not by id (``cancel_flow``)."""
        return _one_or_in(list(range(self.buckets)))

    def ensure_indexes(self) -> None:
        """Create the indexes and check the bucket count (:meth:`check_buckets`) once per
        process (idempotent on the server too). A bucket count that disagrees with the
        collection's raises :class:`~flowsched.ConfigError`, then again on every call."""
        if self._indexed:
            return
        with self._index_lock:
            self.run(self.ensure_indexes_steps())

    def ensure_indexes_steps(self) -> Steps[None]:
        """:meth:`ensure_indexes` as a procedure (the caller keeps callers one at a time)."""
        if self._disagreement is not None:
            raise self._disagreement
        if self._indexed:
            return
        yield from self.check_buckets_steps()
        yield from index_steps()
        self._indexed = True

    def check_buckets(self) -> None:
        """Record this store's bucket count, or compare it (:meth:`check_buckets_steps`)."""
        self.run(self.check_buckets_steps())

    def check_buckets_steps(self) -> Steps[None]:
        """Record this store's bucket count if the collection has none yet, else compare.

        Every filter by id names the item's bucket, ``crc32(id) mod buckets``: a node that
        counts buckets differently would miss other nodes' items - a ``cancel`` returning
        ``False`` for a timer that then fires, say. So a disagreement is refused, with a
        :class:`~flowsched.ConfigError` naming both counts and who recorded the collection's.
        One round trip."""
        try:
            recorded = yield Call(
                "settings",
                "find_one_and_update",
                (
                    {"_id": "buckets"},
                    {"$setOnInsert": {"value": self.buckets, "recorded_by": self.node}},
                ),
                {"upsert": True, "return_document": ReturnDocument.AFTER},
            )
        except DuplicateKeyError:  # two first nodes at once: the other one's count stands
            recorded = None
        if recorded is None:  # some servers return no document for an upsert: read it back
            recorded = yield Call("settings", "find_one", ({"_id": "buckets"},))
        value = None if recorded is None else recorded.get("value")
        if value is None or (value == self.buckets and not isinstance(value, bool)):
            return  # agreed (or nothing readable recorded: nothing to disagree with)
        by = recorded.get("recorded_by") if recorded is not None else None
        self._disagreement = ConfigError.single(
            f"but {self.name} spreads its timers over {value!r} bucket(s) (recorded by "
            f"{by!r} in {self.settings.full_name}), and every node of one collection must "
            f"use the same count (each look-up by id names its bucket): give this node "
            f"buckets={value!r} (ipf-scheduler.flowsched.buckets in application.conf). "
            "Changing the count of a collection that holds timers is not supported: use a "
            "new collection (for an empty one, delete that settings document while no node "
            "runs).",
            key="buckets",
            value=str(self.buckets),
        )
        raise self._disagreement

    # -- the port's operations: sync calls over the procedures ---------------------------

    def put(self, document: Doc, before: datetime | None = None) -> None:
        self.run(self.put_steps(document, before))

    def insert(self, document: Doc) -> bool:
        return self.run(self.insert_steps(document))

    def delete(self, item_id: str, before: datetime | None = None) -> bool:
        return self.run(self.delete_steps(item_id, before))

    def stamped(self, document: Doc) -> dict[str, Any]:
        """``document`` with ``stored_at``: the database's time, never behind it (the
        clock's ``latest``), once the clock is measured (else unstamped, and unfenced)."""
        if self.clock is None or not self.clock.measured:
            return dict(document)
        return {**document, "stored_at": truncate_ms(self.clock.latest())}

    @staticmethod
    def fence(before: datetime | None) -> dict[str, Any]:
        """The filter of forms stored by ``before`` (or unstamped); ``{}`` without it. A write
        given up at ``before`` (:func:`flowsched.mongo.outcome.write_deadline`) that arrives
        later applies to no form stored after that: their stamps are later than ``before``.
        ``$not``/``$gt``, not an ``$or`` with ``$exists``: a server that scans for ``$or`` (the
        test server: 20 ms against 0.6 ms an upsert at 3,000 stored) does not scan."""
        if before is None:
            return {}
        return {"stored_at": {"$not": {"$gt": before}}}

    def exists(self, item_id: str) -> bool:
        return self.run(self.exists_steps(item_id))

    def find(self, item_id: str) -> Doc | None:
        return self.run(self.find_steps(item_id))

    def dead_letters(self) -> list[Doc]:
        return self.run(self.dead_letters_steps())

    def dead_letter(self, item_id: str) -> Doc | None:
        return self.run(self.dead_letter_steps(item_id))

    def put_quarantined(self, records: Sequence[Doc], *, markers: bool = True) -> int:
        return self.run(self.put_quarantined_steps(records, markers=markers))

    # -- the procedures --------------------------------------------------------------------

    def put_steps(self, document: Doc, before: datetime | None = None) -> Steps[None]:
        """Insert or replace the item's document (one upsert, by ``_id`` and bucket); with
        ``before``, only a form stored by then (:meth:`fence`): a newer one stays."""
        document = self.stamped(document)
        key = {**self.key(document["_id"]), **self.fence(before)}
        keep = self.keep_started  # a started delivery's attempt stays in the history
        try:
            first = key if keep is None else {**key, **keeping.STARTED_UNRECORDED}
            yield Call("items", "replace_one", (first, document), {"upsert": True})
        except DuplicateKeyError:
            if keep is not None and (yield from keeping.replace_steps(self, key, document, keep)):
                return
            # Two upserts of one new _id raced; the loser's retry now finds the document.
            # Or the stored one has no bucket yet (written before buckets; `flowsched
            # timers migrate` sets it): replaced by _id alone, as before. Or (``before``)
            # the stored form is newer than the write: it stays.
            if (yield Call("items", "replace_one", (key, document))).matched_count == 0:
                by_id = {"_id": document["_id"], **self.fence(before)}
                with contextlib.suppress(DuplicateKeyError):  # fenced out: a newer form stays
                    yield Call("items", "replace_one", (by_id, document), {"upsert": True})

    def insert_steps(self, document: Doc) -> Steps[bool]:
        """Insert the item's document unless one with its ``_id`` exists; whether it did."""
        try:
            yield Call("items", "insert_one", (self.stamped(document),))
        except DuplicateKeyError:
            return False
        return True

    def delete_steps(self, item_id: str, before: datetime | None = None) -> Steps[bool]:
        """Remove the item (a form stored by ``before``: :meth:`fence`); whether it did."""
        query = {**self.key(item_id), **self.fence(before)}
        if self.keep_started:  # a started delivery's attempt stays in the history
            return (yield from keeping.delete_steps(self, query, self.keep_started))
        result = yield Call("items", "delete_one", (query,))
        return bool(result.deleted_count > 0)

    def exists_steps(self, item_id: str) -> Steps[bool]:
        return (yield Call("items", "find_one", (self.key(item_id), {"_id": 1}))) is not None

    def find_steps(self, item_id: str) -> Steps[Doc | None]:
        found: Doc | None = yield Call("items", "find_one", (self.key(item_id),))
        return found

    def dead_letters_steps(self) -> Steps[list[Doc]]:
        found: list[Doc] = yield Find("dead", {}, sort=[("dead_at", ASCENDING), ("_id", ASCENDING)])
        return found

    def dead_letter_steps(self, item_id: str) -> Steps[Doc | None]:
        found: Doc | None = yield Call("dead", "find_one", ({"_id": item_id},))
        return found

    def put_dead_letters_steps(self, documents: Sequence[Doc]) -> Steps[None]:
        writes = [Write({"_id": d["_id"]}, replacement=d, upsert=True) for d in documents]
        yield from self.write_steps("dead", writes)

    def remove_dead_letter_steps(
        self, item_id: str, generation: int | None = None, token: str | None = None
    ) -> Steps[bool]:
        fields = {"_id": item_id, "generation": generation, "claim_token": token}
        query = {name: value for name, value in fields.items() if value is not None}
        return bool((yield Call("dead", "delete_one", (query,))).deleted_count > 0)

    def put_quarantined_steps(self, records: Sequence[Doc], *, markers: bool = True) -> Steps[int]:
        """Insert quarantine records; how many were new. Ones already there (a retried write,
        another node) are kept as they are. A record the server refuses for another reason
        (a field name it cannot store, say) is replaced by a marker: its ``_id``, the
        reason, and the refusal - the original document is then lost, the marker says so."""
        if not records:
            return 0
        records = list(records)
        try:
            yield Call("quarantine", "insert_many", (records,), {"ordered": False})
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if not errors:
                raise
            refused = [e for e in errors if e.get("code") != _DUPLICATE_KEY]
            written = len(records) - len(errors)
            if refused and markers:
                kept = [_marker(records[e["index"]], e.get("errmsg", "")) for e in refused]
                written += yield from self.put_quarantined_steps(kept, markers=False)
            return written
        return len(records)


TimerStore = MongoCollections
"""The name the mongo modules import (not :class:`flowsched.store.TimerStore`)."""


class _One:
    """One collection under every role (:meth:`TimerStore.write` on a given collection)."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection

    def collection(self, role: str) -> Any:
        return self._collection
