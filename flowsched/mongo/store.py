"""Internal: MongoDB timer storage — the collections and one-round-trip operations on them.

* ``<name>``: one document per scheduled item (see :mod:`flowsched.mongo.documents`);
  indexes ``claim_by_route_bucket`` = ``(route, bucket, ready_at)`` for the sweep and
  ``flow_id_sparse`` (items of a flow only) for ``cancel_flow``. (Versions before routing
  made ``claim`` = ``(kind, ready_at)``; it is no longer used: ``flowsched timers migrate
  --drop-legacy-index`` drops it.)
* ``<name>_dead``: dead letters, ``_id`` = item id, index on ``dead_at``.
* ``<name>_quarantine``: malformed documents moved aside with the reason.
* ``<name>_nodes``: live nodes and the routes they serve (see :mod:`flowsched.mongo.nodes`).
* ``<name>_settings``: what the nodes of the collection share - ``{_id: "buckets", value:
  <n>, recorded_by: <node>}``, written by the first node to use the collection (see
  :meth:`TimerStore.check_buckets`), and ``{_id: "audit", next_at: <date>, by: <node>}``,
  whose turn the poison audit is (see :class:`flowsched.mongo.quarantine.Audit`).

Every method is one server round trip (``ensure_indexes`` aside), raises the driver's errors
unchanged and retries nothing: callers decide (bounded wait for user calls, back off and go on
for the sweeper).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bson.codec_options import DatetimeConversion
from pymongo import (
    ASCENDING,
    DeleteMany,
    DeleteOne,
    ReplaceOne,
    ReturnDocument,
    UpdateMany,
    UpdateOne,
)
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

from flowsched.errors import ConfigError
from flowsched.mongo.documents import bson_utc_or_none, bucket_of

__all__ = [
    "CLAIM_INDEX",
    "CLAIM_INDEX_KEYS",
    "LEGACY_CLAIM_INDEX",
    "Doc",
    "TimerStore",
    "Write",
    "recorded_buckets",
]

Doc = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Write:
    """One write of a batch: delete (no ``update``/``replacement``), update, or replace."""

    filter: Mapping[str, Any]
    update: Mapping[str, Any] | None = None
    replacement: Mapping[str, Any] | None = None
    upsert: bool = False
    many: bool = False  # a delete or update of every document the filter matches

    def operation(self) -> DeleteOne | DeleteMany | UpdateOne | UpdateMany | ReplaceOne[Any]:
        if self.replacement is not None:
            return ReplaceOne(self.filter, self.replacement, upsert=self.upsert)
        if self.update is not None and self.many:
            return UpdateMany(self.filter, self.update, upsert=self.upsert)
        if self.update is not None:
            return UpdateOne(self.filter, self.update, upsert=self.upsert)
        if self.many:
            return DeleteMany(self.filter)
        return DeleteOne(self.filter)


_DUPLICATE_KEY = 11000

CLAIM_INDEX = "claim_by_route_bucket"
CLAIM_INDEX_KEYS = [("route", ASCENDING), ("bucket", ASCENDING), ("ready_at", ASCENDING)]
LEGACY_CLAIM_INDEX = "claim"
"""The claim index of versions before routing: ``(kind, ready_at)``."""


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


def _tolerant(collection: Collection[Any]) -> Collection[Any]:
    """``collection`` reading every document it can hold: a date beyond Python's range comes
    back as ``DatetimeMS`` and invalid UTF-8 as U+FFFD, instead of failing the whole query
    (and so every sweep) on one bad document. The checks then find and quarantine it."""
    if not isinstance(collection, Collection):
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


def recorded_buckets(collection: Collection[Any]) -> int | None:
    """The bucket count the nodes of ``collection`` use, as the first of them recorded it in
    ``<name>_settings`` (``None``: none recorded yet). One round trip."""
    settings = collection.database[f"{collection.name}_settings"]
    recorded = settings.find_one({"_id": "buckets"})
    value = None if recorded is None else recorded.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class TimerStore:
    """MongoDB storage of timers: the items collection, its ``_dead`` and ``_quarantine`` ones."""

    def __init__(
        self,
        collection: Collection[Any],
        buckets: int = 1,
        served: Sequence[int] | None = None,
        node: str = "?",
    ) -> None:
        self.items = _tolerant(collection)
        self.node = node
        """Who this store works for (recorded beside the bucket count it records)."""
        self.buckets = buckets
        self.served: tuple[int, ...] = tuple(range(buckets) if served is None else served)
        """The buckets this node claims from (all, unless told otherwise)."""
        database = collection.database
        self.dead = database[f"{collection.name}_dead"]
        self.quarantine = database[f"{collection.name}_quarantine"]
        self.nodes = database[f"{collection.name}_nodes"]
        self.settings = database[f"{collection.name}_settings"]
        self._indexed = False
        self._disagreement: ConfigError | None = None
        self._index_lock = threading.Lock()

    @staticmethod
    def write(collection: Collection[Any], writes: Sequence[Write]) -> int:
        """Apply ``writes`` unordered in one ``bulk_write`` (one round trip); return how many
        documents the updates and replacements modified.

        Stand-ins that are not pymongo collections (mongomock 4.3 cannot take pymongo 4.9+
        bulk operations) get one call per write instead: same effect, more calls."""
        if not writes:
            return 0
        if isinstance(collection, Collection):
            result = collection.bulk_write([w.operation() for w in writes], ordered=False)
            return int(result.modified_count)
        modified = 0
        for w in writes:
            if w.replacement is not None:
                modified += collection.replace_one(
                    w.filter, w.replacement, upsert=w.upsert
                ).modified_count
            elif w.update is not None and w.many:
                modified += collection.update_many(
                    w.filter, w.update, upsert=w.upsert
                ).modified_count
            elif w.update is not None:
                modified += collection.update_one(
                    w.filter, w.update, upsert=w.upsert
                ).modified_count
            elif w.many:
                collection.delete_many(w.filter)
            else:
                collection.delete_one(w.filter)
        return modified

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
            if self._disagreement is not None:
                raise self._disagreement
            if self._indexed:
                return
            self.check_buckets()
            # (route, bucket, ready_at): the sweep asks, per route and bucket it serves, for
            # ready_at <= now sorted by ready_at - one index range each; other routes are
            # never read.
            self.items.create_index(CLAIM_INDEX_KEYS, name=CLAIM_INDEX)
            # Sparse: an item without a flow (the field is left out) costs no entry here, so
            # claiming and settling it maintains one index less. Replaces the full index of
            # earlier versions ("flow_id"), dropped once.
            self.items.create_index([("flow_id", ASCENDING)], name="flow_id_sparse", sparse=True)
            with contextlib.suppress(OperationFailure):  # not there: new, or dropped already
                self.items.drop_index("flow_id")
            self.dead.create_index([("dead_at", ASCENDING)], name="dead_at")
            self._indexed = True

    def check_buckets(self) -> None:
        """Record this store's bucket count if the collection has none yet, else compare.

        Every filter by id names the item's bucket, ``crc32(id) mod buckets``: a node that
        counts buckets differently would miss other nodes' items - a ``cancel`` returning
        ``False`` for a timer that then fires, say. So a disagreement is refused, with a
        :class:`~flowsched.ConfigError` naming both counts and who recorded the collection's.
        One round trip."""
        try:
            recorded = self.settings.find_one_and_update(
                {"_id": "buckets"},
                {"$setOnInsert": {"value": self.buckets, "recorded_by": self.node}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:  # two first nodes at once: the other one's count stands
            recorded = None
        if recorded is None:  # some servers return no document for an upsert: read it back
            recorded = self.settings.find_one({"_id": "buckets"})
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

    # -- the port's operations -------------------------------------------------------------

    def put(self, document: Doc) -> None:
        """Insert or replace the item's document (one upsert, by ``_id`` and bucket)."""
        key = self.key(document["_id"])
        try:
            self.items.replace_one(key, document, upsert=True)
        except DuplicateKeyError:
            # Two upserts of one new _id raced; the loser's retry now finds the document.
            # Or the stored one has no bucket yet (written before buckets; `flowsched
            # timers migrate` sets it): replaced by _id alone, as before.
            if self.items.replace_one(key, document).matched_count == 0:
                self.items.replace_one({"_id": document["_id"]}, document, upsert=True)

    def insert(self, document: Doc) -> bool:
        """Insert the item's document unless one with its ``_id`` exists; whether it did."""
        try:
            self.items.insert_one(dict(document))
        except DuplicateKeyError:
            return False
        return True

    def delete(self, item_id: str) -> bool:
        return self.items.delete_one(self.key(item_id)).deleted_count > 0

    def delete_flow(self, flow_id: str) -> int:
        query = {"flow_id": flow_id, "bucket": self.every_bucket()}
        return int(self.items.delete_many(query).deleted_count)

    def flow_ids(self, flow_id: str) -> list[str]:
        query = {"flow_id": flow_id, "bucket": self.every_bucket()}
        return [doc["_id"] for doc in self.items.find(query, {"_id": 1})]

    def exists(self, item_id: str) -> bool:
        return self.items.find_one(self.key(item_id), {"_id": 1}) is not None

    def next_ready(
        self, routes: Sequence[str], until: datetime, after: datetime | None = None
    ) -> datetime | None:
        """The earliest ``ready_at`` (at or before ``until``, after ``after`` if given) among
        items of ``routes``: one query on the claim index, one document, ``ready_at`` only."""
        bounds: dict[str, datetime] = {"$lte": until}
        if after is not None:
            bounds["$gt"] = after
        found = self.items.find_one(
            {"route": {"$in": list(routes)}, "ready_at": bounds},
            {"_id": 0, "ready_at": 1},
            sort=[("ready_at", ASCENDING)],
        )
        return None if found is None else bson_utc_or_none(found.get("ready_at"))

    def unrouted_sample(self) -> Doc | None:
        """One item document without a ``route`` (stored before routing), or ``None``.

        ``route: null`` matches missing fields too, and is one range of the claim index."""
        found: Doc | None = self.items.find_one({"route": None}, {"_id": 1})
        return found

    def find(self, item_id: str) -> Doc | None:
        found: Doc | None = self.items.find_one(self.key(item_id))
        return found

    # -- dead letters and quarantine -------------------------------------------------------

    def dead_letters(self) -> list[Doc]:
        return list(self.dead.find().sort([("dead_at", ASCENDING), ("_id", ASCENDING)]))

    def dead_letter(self, item_id: str) -> Doc | None:
        found: Doc | None = self.dead.find_one({"_id": item_id})
        return found

    def put_dead_letters(self, documents: Sequence[Doc]) -> None:
        writes = [Write({"_id": d["_id"]}, replacement=d, upsert=True) for d in documents]
        self.write(self.dead, writes)

    def remove_dead_letter(self, item_id: str, generation: int | None = None) -> bool:
        query: dict[str, Any] = {"_id": item_id}
        if generation is not None:
            query["generation"] = generation
        return self.dead.delete_one(query).deleted_count > 0

    def put_quarantined(self, records: Sequence[Doc], *, markers: bool = True) -> int:
        """Insert quarantine records; how many were new. Ones already there (a retried write,
        another node) are kept as they are. A record the server refuses for another reason
        (a field name it cannot store, say) is replaced by a marker: its ``_id``, the
        reason, and the refusal - the original document is then lost, the marker says so."""
        if not records:
            return 0
        records = list(records)
        try:
            self.quarantine.insert_many(records, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if not errors:
                raise
            refused = [e for e in errors if e.get("code") != _DUPLICATE_KEY]
            written = len(records) - len(errors)
            if refused and markers:
                kept = [_marker(records[e["index"]], e.get("errmsg", "")) for e in refused]
                written += self.put_quarantined(kept, markers=False)
            return written
        return len(records)
