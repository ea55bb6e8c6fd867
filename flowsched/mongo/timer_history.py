"""Internal: the steering reads of the MongoDB timer stores (mongo/timer_ops.py): the
filter of a :class:`~flowsched.store.TimerSelection` for ``timers()`` (soonest due first,
ties by id), and a document as ``timers()`` lists it. (Their history is
:mod:`flowsched.mongo.history`'s.)"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flowsched.mongo.documents import bson_utc
from flowsched.records import ScheduleItem
from flowsched.steering import TimerInfo, TimerState
from flowsched.store.info import timer_info
from flowsched.store.paging import decode_cursor
from flowsched.store.records import TimerSelection

__all__ = ["UNPAUSED", "info_of", "item_filter", "state_filter"]

Doc = dict[str, Any]
UNPAUSED: Doc = {"paused": {"$ne": True}}


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


def info_of(  # a document as timers() lists it (None: unusable, left out and logged)
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
        owner if isinstance(owner, str) and claimed else None,
        lease_until if claimed else None,
    )
