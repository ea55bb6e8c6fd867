"""Internal: the writes and filters of the MongoDB timer stores' firing path
(:mod:`flowsched.mongo.timer_claims`), as values: no I/O.

A claim batch stores one token in every document it claims (``claim.token``, as
``MongoScheduler`` does); a :class:`~flowsched.store.Claim`'s own token is the batch's and its
place in the batch (``<batch>-<n>``): distinct per claim, and ``(id, batch)`` names exactly
one claim, since one batch claims a document at most once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from flowsched.mongo.commands import Write
from flowsched.mongo.documents import MAX_COUNT, truncate_ms
from flowsched.mongo.history import attempt_document
from flowsched.mongo.store import ID_CHUNK
from flowsched.outcomes import DeadLettered, Exhausted, NextSlot, Outcome, Redeliver
from flowsched.steering import Attempt, AttemptOutcome
from flowsched.store.records import Claim, Settlement

__all__ = [
    "batch_of",
    "chunks",
    "claim_fence",
    "distinct",
    "ended_record",
    "is_gone",
    "held_writes",
    "lapses_of",
    "owner_token",
    "settle_write",
    "has_started",
    "unapplied",
]

Doc = dict[str, Any]


def batch_of(claim: Claim) -> str:
    """The token stored in the claimed document: the claim batch's (a claim's own token is
    the batch's and its place in the batch: one batch claims a document at most once)."""
    return claim.token.partition("-")[0]


def chunks(values: list[Any]) -> list[list[Any]]:
    return [values[n : n + ID_CHUNK] for n in range(0, len(values), ID_CHUNK)]


def held_writes(
    claims: Sequence[Claim], live: Doc, fields: Doc | None, *, unpaused: bool = False
) -> list[Write]:
    """One ``update_many`` per claim batch and chunk of ids: ``fields`` set on the
    documents of ``claims`` that still carry their identity, and ``live`` (``fields``
    None: one ``delete_many`` instead). ``unpaused``: and still on their route (a paused
    item's is moved aside)."""
    writes = []
    by_batch: dict[tuple[str, str], list[Claim]] = {}
    for c in claims:
        by_batch.setdefault((batch_of(c), c.owner), []).append(c)
    for (batch, owner), some in by_batch.items():
        for chunk in chunks(some):
            found = {
                "_id": {"$in": [c.item.id for c in chunk]},
                "claim.token": batch,
                "claim.owner": owner,
                "generation": {"$in": distinct(c.generation for c in chunk)},
                **live,
            }
            if unpaused:
                found["route"] = {"$in": distinct(c.item.route for c in chunk)}
            update = None if fields is None else {"$set": fields}
            writes.append(Write(found, update, many=True))
    return writes


def distinct(values: Any) -> list[Any]:
    return list(dict.fromkeys(values))


def has_started(claim: object) -> bool:
    return isinstance(claim, Mapping) and isinstance(claim.get("at"), datetime)


def lapses_of(doc: Mapping[str, Any]) -> int:
    """The runs of ``doc``'s form lost in a row before its claim (``lapses``: missing, or
    not a count, is 0): :attr:`~flowsched.store.Claim.lapsed`."""
    value = doc.get("lapses")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_COUNT:
        return 0
    return value


def owner_token(doc: Mapping[str, Any]) -> tuple[object, object]:
    claim = doc.get("claim")
    return (claim.get("owner"), claim.get("token")) if isinstance(claim, Mapping) else (None, None)


def is_gone(doc: Mapping[str, Any] | None, claim: Claim) -> bool:
    return doc is None or doc.get("generation") != claim.generation


def claim_fence(claim: Claim) -> Doc:
    """A claim's identity, as a filter: what every write of the claim must match."""
    return {
        "_id": claim.item.id,
        "generation": claim.generation,
        "claim.owner": claim.owner,
        "claim.token": batch_of(claim),
    }


def settle_write(settlement: Settlement, mark: str) -> Write:
    """The update of a Redeliver or a NextSlot (it sets values of its own: one each); the
    item is kept, so no run of it is lost since (``lapses`` removed)."""
    claim, outcome = settlement.claim, settlement.outcome
    assert isinstance(outcome, Redeliver | NextSlot)
    due = truncate_ms(outcome.due)
    fields: Doc = {"due": due, "ready_at": due, "claim": None}
    fields["settled_claim"] = f"{claim.token}/{mark}"
    if isinstance(outcome, Redeliver):
        fields |= {"attempts": outcome.attempt, "deliveries": outcome.attempt}
        fields |= {"last_error": outcome.error, **unapplied(claim)}
    else:
        fields |= {"attempts": 0, "deliveries": 0, "last_error": outcome.error}
        fields["applied"] = truncate_ms(outcome.applied) if outcome.applied else None
        if outcome.runs is not None:  # the run is counted in the write of its slot
            fields["runs"] = outcome.runs
    return Write(claim_fence(claim), {"$set": fields, "$unset": {"lapses": ""}})


def unapplied(claim: Claim) -> Doc:
    """For a recurring claim that goes back to waiting for its slot (redelivered, released):
    ``applied`` and ``runs`` set back to the claimed form's (as ``mongo/settlement.py`` does
    after a slot fence), so a slot that did not run is not counted."""
    item = claim.item
    if item.recurrence is None:
        return {}
    previous = truncate_ms(item.previous) if item.previous is not None else None
    return {"applied": previous, "runs": item.runs}


def error_of(outcome: Outcome) -> str | None:
    if isinstance(outcome, Redeliver | NextSlot):
        return outcome.error
    if isinstance(outcome, DeadLettered | Exhausted):
        return outcome.dead.error
    return None


def ended_record(settlement: Settlement, started: datetime, now: datetime) -> Doc:
    """The history record of a settled attempt that started at ``started``."""
    claim = settlement.claim
    error = error_of(settlement.outcome)
    ended: AttemptOutcome = (
        "timed_out" if settlement.timed_out else "failed" if error else "succeeded"
    )
    error_type = message = None
    if error is not None:
        error_type, _, message = error.partition(": ")
    attempt = Attempt(
        claim.owner,
        started,
        now,
        ended,
        error_type,
        message,
        settlement.traceback,
        claim.generation,
        claim.attempt,
    )
    return attempt_document(attempt, batch_of(claim))
