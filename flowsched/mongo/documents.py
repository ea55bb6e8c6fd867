"""Internal: the MongoDB documents of items, dead letters and quarantined docs, and mapping.

Pure mapping between :class:`ScheduleItem` and plain BSON-able dicts (no driver calls here).

A scheduled item's document::

    {_id: <item id>, bucket: <int>, kind: "TIMER", route: "h:<handler>" | "k:<KIND>",
     due: <BSON date>, flow_id: <str> (left out: no flow), payload: <object|null>,
     generation: <int64>, attempts: <int>, deliveries: <int>, last_error: <str|null>,
     ready_at: <BSON date>,
     claim: null | {owner: <node id>, token: <str>, lease_until: <BSON date>}}

* ``bucket`` is :func:`bucket_of` the id (``0`` with the default single bucket): with
  ``_id`` it makes the shard key ``{bucket: 1, _id: 1}``, and every command the scheduler
  sends on this collection names it (see ``docs/explanation/scaling.md``).
* ``route`` is the item's :attr:`~flowsched.ScheduleItem.route`: who may run it. A node
  claims only documents of the routes it serves (index ``route, bucket, ready_at``). An item
  addressed to a named handler also has ``handler: <name>``. Documents written before
  routing have no ``route`` (nor ``bucket``): no node claims them until ``flowsched timers
  migrate`` sets them.

* ``due`` is a BSON date: **milliseconds**. :func:`truncate_ms` drops the microseconds the
  same way the driver does, and ``schedule`` returns the item with that due.
* ``generation`` is a fresh random 63-bit integer on every schedule: together with ``_id``
  it names one schedule, and every write made on behalf of a delivery is fenced on it.
* ``attempts`` counts failed deliveries (what a handler sees as ``attempt``);
  ``deliveries`` counts deliveries that started or may have started. Between deliveries
  they are equal. A fresh claim (``claim`` was null) runs its handler without touching
  them: a failure sets both to the new count when its outcome is written. A claim that finds
  an earlier claim nobody settled (``claim`` not null: its node died or was cut off,
  perhaps mid-handler) is suspect and sets ``deliveries`` to ``attempts + 1`` before its
  handler starts (see :mod:`flowsched.mongo.claims`). So a claimer that finds
  ``deliveries > attempts`` knows a marked delivery started and never finished and counts it
  as a failure; a lost claim whose handler never started (or started unmarked) costs no
  attempt. Both are at most :data:`MAX_COUNT` (a larger value is a malformed document).
* ``claim`` is null except while a node holds the item: every settlement that leaves the
  document in place (failure, next slot, release) clears it - except the release of a
  suspect claim, which stays suspect - so a claim found there at claim time is a lost one.
* ``ready_at`` is when the document may next be claimed: ``due`` while unclaimed, the
  lease's end while claimed. One range on it per route (index ``route, ready_at``) finds
  both due items and items whose claimer stopped renewing its lease.

A paused item's ``route`` is :data:`PAUSED_PREFIX` + its route and it has ``paused: true``:
no node serves that route, so no claim reads it (see :mod:`flowsched.mongo.timer_query`).

A recurring item's document has three more fields: ``recurrence`` (the JSON object of
:meth:`Recurrence.to_json`, with its ``until``, ``max_runs`` and ``calendar`` if set),
``applied`` (BSON date or null: the last slot applied, the item's ``previous``) and ``runs``
(the slots applied so far, what ``max_runs`` counts; a document written before it existed
has none and reads as 0). ``due`` is then when its next slot is looked for. A claimer moves
``applied`` to the slot it is about to run, and ``runs`` on by one, in one conditional update
(see :meth:`flowsched.mongo.claims.Claims.fence_slots`): that is what keeps two nodes from
both applying one slot, and counts each applied slot once across nodes and restarts.
"""

from __future__ import annotations

import logging
import random
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flowsched.config.scheduler_settings import MAX_BUCKETS
from flowsched.errors import MalformedDocument
from flowsched.limits import short_repr
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence

__all__ = [
    "dead_letters_from",
    "MAX_BUCKETS",
    "MAX_COUNT",
    "MAX_RECORD_BYTES",
    "MalformedDocument",
    "PAUSED_PREFIX",
    "StoredItem",
    "bson_utc",
    "bson_utc_or_none",
    "bucket_of",
    "dead_letter_document",
    "dead_letter_from_document",
    "item_document",
    "new_generation",
    "optional_ms",
    "quarantine_document",
    "short_repr",
    "stored_item",
    "truncate_ms",
]

log = logging.getLogger("flowsched.mongo")


PAUSED_PREFIX = "paused:"
"""Prefix of a paused item's route (no node serves it, so none claims the item)."""

MAX_COUNT = 1_000_000_000
"""Largest ``attempts``/``deliveries`` a document may hold (a billion failures at the 30 s
cap is 950 years); a claim checks ``deliveries < MAX_COUNT`` before adding to it."""

MAX_RECORD_BYTES = 16 * 1024 * 1024 - 64 * 1024
"""Largest quarantine record written: MongoDB's 16 MiB document limit, less some room for
the server's own overhead. A bigger original is kept field by field as far as this allows."""


@dataclass(frozen=True, slots=True)
class StoredItem:
    """An item read back from its document, with its delivery counters."""

    item: ScheduleItem
    attempts: int
    deliveries: int

    def lost(self) -> int:
        """Deliveries marked started by earlier claims that neither completed nor failed."""
        return max(0, self.deliveries - self.attempts)


def bson_utc(value: datetime) -> datetime:
    """A date read from MongoDB as a timezone-aware UTC datetime: BSON dates are UTC, and a
    client without ``tz_aware=True`` (mongomock's default) hands them back naive."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def bson_utc_or_none(value: object) -> datetime | None:
    """:func:`bson_utc` of ``value`` if it is a date; ``None`` for anything else."""
    return bson_utc(value) if isinstance(value, datetime) else None


def truncate_ms(when: datetime) -> datetime:
    """``when`` in UTC with microseconds cut to whole milliseconds (BSON date precision)."""
    when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return when.replace(microsecond=when.microsecond - when.microsecond % 1000)


def optional_ms(when: datetime | None) -> datetime | None:
    """:func:`truncate_ms` of ``when``, or ``None``."""
    return None if when is None else truncate_ms(when)


def new_generation(rng: random.Random | None = None) -> int:
    """A random positive 63-bit integer (fits BSON int64); never 0, the "unset" value."""
    return (rng or random).getrandbits(63) or 1


def bucket_of(item_id: object, buckets: int) -> int:
    """The item's bucket in ``0 .. buckets - 1``: CRC-32 of its id, the same on every node
    and every run (part of the shard key ``{bucket: 1, _id: 1}``)."""
    if buckets <= 1:
        return 0
    text = item_id if isinstance(item_id, str) else repr(item_id)
    return zlib.crc32(text.encode("utf-8")) % buckets


def item_document(
    item: ScheduleItem, generation: int, attempts: int = 0, bucket: int = 0
) -> dict[str, Any]:
    """The full document for a fresh schedule of ``item`` (unclaimed, no failures yet)."""
    due = truncate_ms(item.due)
    document: dict[str, Any] = {
        "_id": item.id,
        "bucket": bucket,
        "kind": item.kind.value,
        "route": item.route,
        "due": due,
        "payload": dict(item.payload) if item.payload is not None else None,
        "generation": generation,
        "attempts": attempts,
        "deliveries": attempts,
        "last_error": None,
        "ready_at": due,
        "claim": None,
    }
    if item.flow_id is not None:  # left out otherwise: the flow_id index is sparse
        document["flow_id"] = item.flow_id
    return _with_options(document, item)


def _with_options(document: dict[str, Any], item: ScheduleItem) -> dict[str, Any]:
    # Kind-routed one-shot items' documents stay as they were: no handler or recurrence.
    if item.handler is not None:
        document["handler"] = item.handler
    if item.recurrence is not None:
        document["recurrence"] = item.recurrence.to_json()
        document["applied"] = optional_ms(item.previous)
        document["runs"] = item.runs
    return document


def stored_item(doc: Mapping[str, Any]) -> StoredItem:
    """Validate ``doc`` and rebuild its item; :class:`MalformedDocument` names what is wrong."""
    item_id = doc.get("_id")
    item = _item(doc, item_id)
    attempts = _count(doc, "attempts", item_id)
    deliveries = _count(doc, "deliveries", item_id, default=attempts)
    return StoredItem(item, attempts, deliveries)


def _item(doc: Mapping[str, Any], item_id: object) -> ScheduleItem:
    if not isinstance(item_id, str) or not item_id:
        raise MalformedDocument(item_id, f"_id must be a non-empty string, got {item_id!r}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or kind not in ScheduleKind.__members__.values():
        valid = ", ".join(k.value for k in ScheduleKind)
        raise MalformedDocument(item_id, f"kind {kind!r} is not one of {valid}")
    due = _date(doc, "due", item_id)
    flow_id = doc.get("flow_id")
    if flow_id is not None and not isinstance(flow_id, str):
        raise MalformedDocument(item_id, f"flow_id must be a string or null, got {flow_id!r}")
    generation = doc.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool):
        raise MalformedDocument(item_id, f"generation must be an integer, got {generation!r}")
    recurrence, applied = _recurrence(doc, item_id)
    runs = _count(doc, "runs", item_id) if recurrence is not None else 0
    try:
        item = ScheduleItem(
            item_id,
            ScheduleKind(kind),
            due,
            flow_id,
            doc.get("payload"),
            recurrence=recurrence,
            previous=applied,
            handler=doc.get("handler"),
            runs=runs,
        )
    except (TypeError, ValueError) as exc:
        raise MalformedDocument(item_id, str(exc)) from None
    route = doc.get("route")
    if route is not None and route != item.route and route != PAUSED_PREFIX + item.route:
        # Claimed by its route: delivered by handler/kind, the two must agree.
        raise MalformedDocument(
            item_id, f"route {route!r} does not match its handler/kind ({item.route!r})"
        )
    return item.with_generation(generation)


def _recurrence(
    doc: Mapping[str, Any], item_id: object
) -> tuple[Recurrence | None, datetime | None]:
    data = doc.get("recurrence")
    if data is None:
        return None, None
    if not isinstance(data, Mapping):
        raise MalformedDocument(item_id, f"recurrence must be an object, got {data!r}")
    try:
        recurrence = Recurrence.from_json(dict(data))
    except (TypeError, ValueError) as exc:
        raise MalformedDocument(item_id, f"recurrence: {exc}") from None
    if recurrence.start is None:
        raise MalformedDocument(item_id, f"recurrence has no start: {dict(data)!r}")
    applied = doc.get("applied")
    if applied is None:
        return recurrence, None
    return recurrence, _date(doc, "applied", item_id)


def _date(doc: Mapping[str, Any], name: str, item_id: object) -> datetime:
    value = doc.get(name)
    if not isinstance(value, datetime):
        raise MalformedDocument(item_id, f"{name} must be a date, got {value!r}")
    return bson_utc(value)


def _count(doc: Mapping[str, Any], name: str, item_id: object, default: int = 0) -> int:
    value = doc.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise MalformedDocument(
            item_id, f"{name} must be an integer >= 0 and <= {MAX_COUNT}, got {value!r}"
        )
    return value


def dead_letter_document(dead: DeadLetter) -> dict[str, Any]:
    """The document kept in ``<collection>_dead`` for a dead letter (``_id`` = item id)."""
    item = dead.item
    document = {
        "_id": item.id,
        "kind": item.kind.value,
        "due": truncate_ms(item.due),
        "flow_id": item.flow_id,
        "payload": dict(item.payload) if item.payload is not None else None,
        "generation": item.generation,
        "attempts": dead.attempts,
        "error": dead.error,
        "dead_at": truncate_ms(dead.dead_at),
    }
    return _with_options(document, item)


def dead_letter_from_document(doc: Mapping[str, Any]) -> DeadLetter:
    """Rebuild a :class:`DeadLetter`; :class:`MalformedDocument` if the document is not one."""
    item_id = doc.get("_id")
    item = _item(doc, item_id)
    attempts = _count(doc, "attempts", item_id)
    error = doc.get("error")
    if not isinstance(error, str):
        raise MalformedDocument(item_id, f"error must be a string, got {error!r}")
    return DeadLetter(item, attempts, error, _date(doc, "dead_at", item_id))


def dead_letters_from(documents: Iterable[Mapping[str, Any]], where: str) -> list[DeadLetter]:
    """The dead letters of ``documents``; a malformed record is logged (naming ``where``)
    and skipped."""
    letters = []
    for document in documents:
        try:
            letters.append(dead_letter_from_document(document))
        except MalformedDocument as exc:
            log.error("%s: %s", where, exc)
    return letters


def quarantine_document(
    doc: Mapping[str, Any], reason: str, node_id: str, when: datetime
) -> dict[str, Any]:
    """The record kept in ``<collection>_quarantine``: the original document and why.

    The original is kept whole when the record fits :data:`MAX_RECORD_BYTES`; otherwise its
    largest fields are replaced by a note of their type and size (``trimmed`` lists them)
    until it fits, so that even a 16 MiB document can be moved aside."""
    record: dict[str, Any] = {
        "item_id": doc.get("_id"),
        "document": dict(doc),
        "reason": reason,
        "node": node_id,
        "quarantined_at": truncate_ms(when),
    }
    if _size(record) <= MAX_RECORD_BYTES:
        return record
    sizes = sorted(((_size({"v": v}), k) for k, v in doc.items()), reverse=True)
    kept = dict(doc)
    trimmed: list[str] = []
    for size, key in sizes:
        kept[key] = f"<{type(doc[key]).__name__} of {size} bytes: too large to keep>"
        trimmed.append(key)
        record["document"] = kept
        if key == "_id":
            record["item_id"] = short_repr(doc.get("_id"))
        if _size(record) + 1024 <= MAX_RECORD_BYTES:
            break
    record["trimmed"] = trimmed
    return record


def _size(document: Mapping[str, Any]) -> int:
    import bson  # here: the rest of this module is read without the driver (the CLI)

    try:
        return len(bson.encode(document))
    except (bson.errors.BSONError, OverflowError, TypeError, ValueError):
        return MAX_RECORD_BYTES + 1  # cannot even be encoded: trim it
