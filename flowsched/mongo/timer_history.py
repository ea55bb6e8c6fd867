"""Internal: the history and steering reads of MongoTimerStore (mongo/timer_store.py).

AttemptLog: ``<name>_history``, one document per attempt ``{item_id, generation, attempt, node,
started, ended, outcome, error_type, error_message, traceback, seq}``, at most
``limit`` per id (the oldest deleted as new ones come). Queries for ``timers()``: the filter
of a :class:`~flowsched.store.TimerSelection`, soonest due first, ties by id.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pymongo.collection import Collection

from flowsched.mongo.documents import bson_utc, bson_utc_or_none
from flowsched.records import ScheduleItem
from flowsched.steering import ATTEMPT_OUTCOMES, Attempt, AttemptOutcome, TimerInfo, TimerState
from flowsched.store.info import timer_info
from flowsched.store.paging import decode_cursor
from flowsched.store.records import TimerSelection

__all__ = ["UNPAUSED", "AttemptLog", "info_of", "item_filter", "state_filter"]

Doc = dict[str, Any]
UNPAUSED: Doc = {"paused": {"$ne": True}}
_LAST = [0]
_SEQ_LOCK = threading.Lock()


def _seq() -> int:
    """Wall-clock nanoseconds, strictly increasing within this process (history order)."""
    with _SEQ_LOCK:
        _LAST[0] = max(_LAST[0] + 1, time.time_ns())
        return _LAST[0]


class AttemptLog:
    """The attempts of each item, bounded per id."""

    def __init__(self, collection: Collection[Doc], limit: int) -> None:
        self.collection = collection
        self.limit = limit

    def started(
        self, item_id: str, generation: int, attempt: int, node: str, started: datetime
    ) -> None:
        self.collection.insert_one(
            {
                "item_id": item_id,
                "generation": generation,
                "attempt": attempt,
                "node": node,
                "started": started,
                "ended": None,
                "outcome": None,
                "seq": _seq(),
            }
        )
        old = list(
            self.collection.find({"item_id": item_id}, {"_id": 1}).sort("seq", -1).skip(self.limit)
        )
        if old:
            self.collection.delete_many({"_id": {"$in": [doc["_id"] for doc in old]}})

    def ended(
        self,
        item_id: str,
        *,
        node: str,
        generation: int,
        attempt: int,
        ended: datetime,
        outcome: AttemptOutcome,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        error_type = error_message = None
        if error is not None:
            error_type, _, error_message = error.partition(": ")
        self.collection.update_many(
            {
                "item_id": item_id,
                "node": node,
                "generation": generation,
                "attempt": attempt,
                "ended": None,
            },
            {
                "$set": {
                    "ended": ended,
                    "outcome": outcome,
                    "error_type": error_type,
                    "error_message": error_message,
                    "traceback": traceback,
                }
            },
        )

    def of(self, item_id: str) -> list[Attempt]:
        docs = self.collection.find({"item_id": item_id}).sort("seq", 1)
        return [_attempt(doc) for doc in docs]


def _attempt(doc: Mapping[str, Any]) -> Attempt:
    outcome = doc.get("outcome")
    return Attempt(
        node=str(doc.get("node")),
        started=bson_utc(doc["started"]),
        ended=bson_utc_or_none(doc.get("ended")),
        outcome=outcome if outcome in ATTEMPT_OUTCOMES else None,
        error_type=_text(doc.get("error_type")),
        error_message=_text(doc.get("error_message")),
        traceback=_text(doc.get("traceback")),
        generation=doc.get("generation") if isinstance(doc.get("generation"), int) else None,
        attempt=doc["attempt"] if isinstance(doc.get("attempt"), int) else 0,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def item_filter(selection: TimerSelection) -> Doc:
    """The filter of ``selection`` (the state aside, the cursor included), on the items
    collection or the dead letters (they keep the same field names)."""
    found: Doc = {}
    if selection.id_prefix is not None:
        found["_id"] = {"$regex": "^" + re.escape(selection.id_prefix)}
    if selection.flow_id is not None:
        found["flow_id"] = selection.flow_id
    if selection.kind is not None:
        found["kind"] = selection.kind.value
    if selection.handler is not None:
        found["handler"] = selection.handler
    due: Doc = {}
    if selection.due_from is not None:
        due["$gte"] = selection.due_from
    if selection.due_to is not None:
        due["$lte"] = selection.due_to
    if due:
        found["due"] = due
    if selection.after is not None:
        after_due, after_id = decode_cursor(selection.after)
        found["$or"] = [
            {"due": {"$gt": after_due}},
            {"due": after_due, "_id": {"$gt": after_id}},
        ]
    return found


def state_filter(state: str | None, now: datetime) -> Doc:
    """The filter of a ``timers()`` state on the items collection, at ``now``."""
    if state == "paused":
        return {"paused": True}
    if state == "claimed":
        return {**UNPAUSED, "claim.lease_until": {"$gt": now}}
    if state == "scheduled":
        return {**UNPAUSED, "$nor": [{"claim.lease_until": {"$gt": now}}]}
    return {}


def info_of(  # a document as timers() lists it (None: unusable, quarantined)
    doc: Mapping[str, Any], now: datetime, read: tuple[ScheduleItem, int] | None
) -> TimerInfo | None:
    if read is None:
        return None
    item, attempts = read
    claim = doc.get("claim")
    claim = claim if isinstance(claim, Mapping) else {}
    lease = claim.get("lease_until")
    lease_until = bson_utc(lease) if isinstance(lease, datetime) else None
    claimed = lease_until is not None and lease_until > now
    state: TimerState = (
        "paused" if doc.get("paused") is True else "claimed" if claimed else "scheduled"
    )
    error = doc.get("last_error")
    owner = claim.get("owner")
    return timer_info(
        item,
        state,
        attempts,
        error if isinstance(error, str) else None,
        owner if isinstance(owner, str) else None,
        lease_until,
    )
