"""Internal: a cancel or a replace that meets a started delivery keeps its attempt in the
history (CONTRACT section 15).

A delivery whose handler starts at once records its start in the item's claim
(``claim.started``, :mod:`flowsched.mongo.claim_start`), and ``history(item_id)`` shows the
attempt open, read from that claim (:mod:`flowsched.mongo.history`). A ``cancel`` removes the
document and a replacing ``schedule`` rewrites it: the claim would go with it, and the attempt
would be missing from the history until the node that runs it writes its outcome - while the
caller, told that the delivery had started, looks for it there. So the document's attempt is
written into the history as the document goes:

* the first write is the usual one (one round trip), conditional on no recorded start
  (:data:`STARTED_UNRECORDED`), so a document whose delivery has not started - no claim, or a
  claim waiting for a worker - goes as before;
* only when that matched nothing (no such item, or its delivery recorded a start) is the
  document read (one ``find_one``), and a recorded start sends the attempt's history upsert
  and the removal (or replacement), fenced on that claim's token, together - one
  ``bulkWrite`` on MongoDB 8.0+ (:mod:`flowsched.mongo.together`), else the history first.

When the node's outcome of that attempt arrives, its record (same start and generation)
takes the kept one's place on reading; with none by the claim's lease end, the kept attempt
reads ``"lapsed"`` there once its node is gone (no live heartbeat in ``<name>_nodes``: it
died), and stays open while its node is alive (a handler that outlasts its lease)
(:meth:`~flowsched.mongo.history.MongoHistory.kept`).
A cancel of an item that is not there costs two round trips (the conditional delete, then the
read that finds nothing). A claim waiting for a worker records no start:
it is checked before its handler (:mod:`flowsched.mongo.start_check`) and a cancel that came
first wins, so there is no attempt to keep. Cancelling a whole flow (``cancel_flow``) does not
read its documents first: an attempt it meets is listed once its outcome is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from flowsched.mongo.commands import Call, Steps, Write
from flowsched.mongo.together import together_steps
from flowsched.mongo.transient import is_transient

if TYPE_CHECKING:
    from flowsched.mongo.store import TimerStore

__all__ = ["STARTED_UNRECORDED", "KeepStarted", "delete_steps", "replace_steps"]

log = logging.getLogger("flowsched.mongo")

STARTED_UNRECORDED: dict[str, Any] = {"claim.started": {"$exists": False}}
"""The filter of a document whose delivery has recorded no start."""

KeepStarted = Callable[[Mapping[str, Any]], Write | None]
"""The history upsert that keeps the attempt a document's claim recorded as started (``None``:
no recorded start): :meth:`flowsched.mongo.history.MongoHistory.kept`."""

TRIES = 3
"""Reads of a document that changes under the fenced write (settled, claimed afresh) before
the plain write of old is sent."""

_CLAIM = {"claim": 1, "generation": 1, "attempts": 1}


def delete_steps(store: TimerStore, query: Mapping[str, Any], keep: KeepStarted) -> Steps[bool]:
    """Remove the document ``query`` finds, keeping a recorded start's attempt (see the
    module); whether it removed one."""
    removed = yield Call("items", "delete_one", ({**query, **STARTED_UNRECORDED},))
    if removed.deleted_count:
        return True
    for _ in range(TRIES):
        document = yield Call("items", "find_one", (query, _CLAIM))
        if document is None:
            return False
        kept, fence = _kept(document, keep)
        counts = yield from _with(store, kept, Write({**query, **fence}))
        if counts:
            return True
    removed = yield Call("items", "delete_one", (query,))
    return bool(removed.deleted_count)


def replace_steps(
    store: TimerStore, query: Mapping[str, Any], document: Mapping[str, Any], keep: KeepStarted
) -> Steps[bool]:
    """After the conditional upsert (on :data:`STARTED_UNRECORDED`) met a duplicate key:
    replace a stored form whose delivery recorded its start, keeping its attempt; ``False``
    if the stored form has no recorded start (the caller goes on as before)."""
    for _ in range(TRIES):
        stored = yield Call("items", "find_one", (query, _CLAIM))
        if stored is None:
            return False
        kept, fence = _kept(stored, keep)
        if kept is None:
            return False
        replace = Write({**query, **fence}, replacement=dict(document))
        if (yield from _with(store, kept, replace)):
            return True
    return False


def _kept(document: Mapping[str, Any], keep: KeepStarted) -> tuple[Write | None, dict[str, Any]]:
    """The history write that keeps ``document``'s started attempt, and the fence of the
    write that removes or replaces that form: its claim's token (or no recorded start)."""
    kept = keep(document)
    claim = document.get("claim")
    if kept is None or not isinstance(claim, Mapping):
        return None, dict(STARTED_UNRECORDED)
    return kept, {"claim.token": claim.get("token")}


def _with(store: TimerStore, kept: Write | None, write: Write) -> Steps[int]:
    """``write`` to the items and ``kept`` to the history (together where the server can,
    else the history first); how many documents ``write`` matched or removed."""
    if kept is not None:
        done = yield from together_steps((("items", [write]), ("history", [kept])), store.together)
        if done is not None:
            if done.refused[1]:
                log.error("history: the started attempt of a removed form was refused")
            if not done.refused[0]:
                return done.counts[0].matched + done.counts[0].deleted
        else:
            yield from _keep(store, kept)
    if write.replacement is not None:
        result = yield Call("items", "replace_one", (write.filter, write.replacement))
        return int(result.matched_count)
    result = yield Call("items", "delete_one", (write.filter,))
    return int(result.deleted_count)


def _keep(store: TimerStore, kept: Write) -> Steps[None]:
    """``kept`` on its own (before the write it keeps an attempt of)."""
    try:
        yield from store.write_steps("history", [kept])
    except Exception as exc:  # the history is a record: a refused one does not stop this
        if is_transient(exc):
            raise  # the caller's call is retried whole
        log.error("history: the started attempt of a removed form is not kept: %s", exc)
