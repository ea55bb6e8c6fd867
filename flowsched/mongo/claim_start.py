"""Internal: the claiming update, and the starts it records (start on claim).

A running node that will call a claim's handler at once (a free handler slot for it) has
the claim itself record the start (``run_due`` records none: it calls its batch's handlers
one after another, each checked first):
``claim.started`` is set by the same conditional ``update_many`` that takes the document
(one more statement in the same ``update`` command: no round trip of its own). The claim
then *is* the check before the start (:mod:`flowsched.mongo.start_check`): conditional on
the generation read and on the document being claimable, it is ordered by the database
before any cancel or replace that returns after it, and that cancel or replace finds a
delivery that had started: ``history`` lists it once its outcome is written (ended after the
cancel, with this ``started``), not while it still runs (the cancel removed the document
whose claim showed it open). A claim that will wait for a slot records nothing and is
checked before its handler, as before.

**The time recorded** is the claim's own ``now``: the time the claim's condition
(``ready_at <= now``) was judged by, never ahead of the database's clock
(:func:`~flowsched.mongo.server_clock.due_now`). So the start recorded is never before the
item's due time and never after the moment the database applied the claim - hence before any
cancel or replace applied after it, which is all section 15 asks of it; and it is the same
instant as ``claim.at``. ``$$NOW`` in a pipeline update would be the server's own clock at
the write (the wire server evaluates it), but mongomock ignores it (it stores nothing,
silently), every literal of the claim would need ``$literal``, and the measured ``now`` is
within the clock's error bound of it, on the safe side (earlier).

Suspect claims (:attr:`~flowsched.mongo.settlement.Claim.suspect`) record no start here:
their start is marked (``deliveries``) and checked before their handlers, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo.errors import BulkWriteError, WriteError

from flowsched.mongo.commands import Call, Steps
from flowsched.mongo.quarantine import CLAIM_FIELDS, Quarantiner
from flowsched.mongo.store import Doc, TimerStore, Write, id_chunks
from flowsched.mongo.transient import is_transient

__all__ = ["claim_writes", "starting_ids", "take_claims_steps", "with_start"]

log = logging.getLogger("flowsched.mongo")


def starting_ids(due: Sequence[Doc], start: int) -> frozenset[str]:
    """``repr`` of the ids whose start the claim records: the first ``start`` of ``due``
    (oldest first) that carry no earlier claim (a suspect's start is marked and checked)."""
    if start <= 0:
        return frozenset()
    fresh = (repr(doc["_id"]) for doc in due if doc.get("claim") is None)
    return frozenset(key for _, key in zip(range(start), fresh, strict=False))


def with_start(update: dict[str, Any], started: datetime) -> dict[str, Any]:
    """The claiming ``update`` (``{"$set": {"claim": {...}, ...}}``) that also records the
    start (``claim.started``)."""
    changes = dict(update["$set"])
    changes["claim"] = {**changes["claim"], "started": started}
    return {**update, "$set": changes}


def claim_writes(
    store: TimerStore,
    ids: Sequence[Any],
    where: dict[str, Any],
    updates: tuple[dict[str, Any], dict[str, Any]],
    starting: frozenset[str],
    due: Sequence[Doc],
) -> list[Write]:
    """The claim's ``update_many`` statements (ids in chunks, each also on the generations
    read): ``updates[1]`` (recording the start) for the ids ``starting``, ``updates[0]`` for
    the rest. All updates: one ``update`` command, one round trip."""
    generation = {repr(doc["_id"]): doc.get("generation") for doc in due}
    started = [i for i in ids if repr(i) in starting]
    queued = [i for i in ids if repr(i) not in starting]
    writes = []
    for group, update in ((started, updates[1]), (queued, updates[0])):
        for chunk in id_chunks(group):
            generations = sorted({generation[repr(i)] for i in chunk}, key=repr)
            fence = {**store.keys(chunk), "generation": {"$in": generations}, **where}
            writes.append(Write(fence, update, many=True))
    return writes


def take_claims_steps(
    store: TimerStore,
    poison: Quarantiner,
    where: dict[str, Any],
    updates: tuple[dict[str, Any], dict[str, Any]],
    starting: frozenset[str],
    due: Sequence[Doc],
    now: datetime,
) -> Steps[tuple[int, int]]:
    """The claiming update of ``due``: how many documents it claimed (``len(due)`` only if
    it certainly claimed each as read; else the caller reads back what it won), and how many
    documents it quarantined.

    One bulk write (:func:`claim_writes`). If the server refuses it for good, one update per
    id, and the documents it still refuses (one at the 16 MiB limit cannot take a claim)
    are quarantined with the server's reason."""
    ids = [doc["_id"] for doc in due]
    writes = claim_writes(store, ids, where, updates, starting, due)
    try:
        return (yield from store.write_steps("items", writes)), 0
    except (BulkWriteError, WriteError) as exc:
        if is_transient(exc):
            raise
        log.warning("claim refused by the server, claiming one by one: %s", exc)
    refused: list[tuple[Doc, str]] = []
    for doc in due:
        update = updates[1] if repr(doc["_id"]) in starting else updates[0]
        try:
            yield Call("items", "update_one", ({**store.key(doc["_id"]), **where}, update))
        except WriteError as exc:
            if is_transient(exc):
                raise
            refused.append((doc, f"the server refused to claim it: {exc}"[:1000]))
    removed = 0
    if refused:
        removed = yield from poison.unclaimed_steps(refused, CLAIM_FIELDS, now)
    return -1, removed  # read back what was won (the first update may have won some)
