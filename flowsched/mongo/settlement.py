"""Internal: settlements - what a node writes back for each document it claimed.

A :class:`Claim` is an item this node has locked for delivery; once delivered (or given
back, or found malformed) its outcome becomes a :class:`Settlement`: the delivery core's
outcome (:class:`~flowsched.delivery.Completed`, :class:`~flowsched.delivery.Redeliver`,
:class:`~flowsched.delivery.DeadLettered`, :class:`~flowsched.delivery.NextSlot`) or one
of this adapter's own (:class:`Release`, :class:`Quarantine`), with the fence it must be
written under: the item's ``_id`` and ``bucket``, its ``generation`` and the claim
``token``. :func:`settlement_writes` turns settlements into the bulk write
:meth:`flowsched.mongo.claims.Claims.settle` sends, so a stale claim never deletes or
reschedules what replaced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from flowsched.delivery import Completed, DeadLettered, Exhausted, NextSlot, Redeliver
from flowsched.mongo.documents import item_document, optional_ms, quarantine_document, truncate_ms
from flowsched.mongo.store import Doc, TimerStore, Write, id_chunks
from flowsched.records import ScheduleItem

__all__ = [
    "Action",
    "Claim",
    "Quarantine",
    "Release",
    "Settlement",
    "bucket_fence",
    "quarantine_record",
    "settlement_writes",
    "start_mark",
]


@dataclass(frozen=True, slots=True)
class LockedClaim:
    """An item this node has locked for delivery: the item, earlier failures, the lock token."""

    item: ScheduleItem
    attempt: int
    token: str
    suspect: bool = False
    """The document carried an earlier claim that was never settled (its node died or was
    cut off, maybe mid-handler): mark this delivery started before its handler runs."""
    started: datetime | None = None
    """When the claim itself recorded this delivery's start (``claim.started``, database
    time): it starts at once, unchecked (:mod:`flowsched.mongo.start_check`). ``None``: the
    claim waits for a handler slot and is checked before it starts."""


Claim = LockedClaim
"""The name the mongo modules import (not :class:`flowsched.store.Claim`)."""


@dataclass(frozen=True, slots=True)
class Release:
    """Give a claimed item back undelivered (closing): claimable again at ``due``, its
    delivery uncounted (``deliveries`` back to its ``attempt``)."""

    due: datetime
    attempt: int


@dataclass(frozen=True, slots=True)
class Quarantine:
    """Move a malformed document aside, with the reason."""

    document: Doc
    reason: str


Action = Completed | Redeliver | DeadLettered | NextSlot | Release | Quarantine


@dataclass(frozen=True, slots=True)
class DocSettlement:
    """What to write for one claimed document (``generation`` None: fence on token only).

    ``unapply``: for a recurring item whose slot was fenced but that goes back to waiting for
    the same slot (redelivered, or released undelivered): ``applied`` and ``runs`` are set
    back to these.
    ``suspect``: the claim was suspect (:attr:`Claim.suspect`); released undelivered, it keeps
    its ``claim`` (its lease ended), so the next claimer marks its start too."""

    item_id: Any
    generation: int | None
    token: str
    action: Action
    unapply: tuple[datetime | None, int] | None = None
    suspect: bool = False
    late: bool = False
    """A completion that came after its lease ended (:mod:`flowsched.mongo.leases`): fenced
    on ``_id`` + ``generation`` only, so it settles that generation whoever holds it now."""

    @classmethod
    def of(cls, claim: Claim, action: Action | Exhausted) -> Settlement:
        """The settlement of ``claim``; an :class:`~flowsched.delivery.Exhausted` recurring
        item is quarantined (the delivery core's rule), its record the item as claimed."""
        item = claim.item
        if isinstance(action, Exhausted):
            document = item_document(item, item.generation, claim.attempt)
            action = Quarantine(document, f"recurrence: {action.dead.error}")
        unapply = None
        if item.recurrence is not None and isinstance(action, Redeliver | Release):
            unapply = (item.previous, item.runs)
        return cls(item.id, item.generation, claim.token, action, unapply, claim.suspect)

    def settled_late(self) -> Settlement:
        """This settlement, fenced as a late completion (see :attr:`late`)."""
        return replace(self, late=True)

    def fence(self) -> dict[str, Any]:
        if self.late and self.generation is not None:
            return {"_id": self.item_id, "generation": self.generation}
        fence: dict[str, Any] = {"_id": self.item_id, "claim.token": self.token}
        if self.generation is not None:
            fence["generation"] = self.generation
        return fence


Settlement = DocSettlement
"""The name the mongo modules import (not :class:`flowsched.store.Settlement`)."""


def bucket_fence(settlement: Settlement, store: TimerStore) -> dict[str, Any]:
    """The settlement's fence with the item's bucket (the shard key)."""
    return {**settlement.fence(), "bucket": store.bucket(settlement.item_id)}


def quarantine_record(settlement: Settlement, owner: str, now: datetime) -> dict[str, Any]:
    """The ``<name>_quarantine`` record of a :class:`Quarantine` settlement by ``owner``; its
    ``_id`` is one per (document, claim), so a retried settle does not duplicate it."""
    assert isinstance(settlement.action, Quarantine)
    record = quarantine_document(settlement.action.document, settlement.action.reason, owner, now)
    record["_id"] = f"{settlement.token}:{settlement.item_id!r}"
    return record


def settlement_writes(settlements: Sequence[Settlement], store: TimerStore) -> list[Write]:
    """The writes for ``settlements``: completed items one delete per claim token (per
    chunk of ids, see :data:`~flowsched.mongo.store.ID_CHUNK`).

    A claim token is fresh for every claim and a replaced or requeued document carries no
    claim, so ``_id`` + token fence a completed item as exactly as ``_id`` + generation +
    token: the server deletes a whole completed batch in one operation instead of one each.
    """
    completed: dict[str, list[Any]] = {}
    writes = []
    for settlement in settlements:
        late = settlement.late
        if (
            isinstance(settlement.action, Completed)
            and settlement.generation is not None
            and not late
        ):
            completed.setdefault(settlement.token, []).append(settlement.item_id)
        elif (write := _write(settlement, bucket_fence(settlement, store))) is not None:
            writes.append(write)
    for token, ids in completed.items():
        for chunk in id_chunks(ids):  # one round trip still, see ID_CHUNK
            if len(chunk) == 1:
                writes.append(Write({**store.key(chunk[0]), "claim.token": token}))
            else:
                writes.append(Write({**store.keys(chunk), "claim.token": token}, many=True))
    return writes


def _write(settlement: Settlement, fence: dict[str, Any]) -> Write | None:
    action = settlement.action
    if isinstance(action, Completed | Quarantine):
        return Write(fence)
    changes: dict[str, Any]
    if isinstance(action, NextSlot):
        due = truncate_ms(action.due)
        changes = {
            "due": due,
            "ready_at": due,
            "applied": optional_ms(action.applied),
            "attempts": 0,
            **({} if action.runs is None else {"runs": action.runs}),
            "deliveries": 0,
            "last_error": action.error,
            "claim": None,
        }
        return Write(fence, {"$set": changes})
    if isinstance(action, Redeliver):
        due = truncate_ms(action.due)
        changes = {
            "due": due,
            "ready_at": due,
            "attempts": action.attempt,
            "deliveries": action.attempt,
            "last_error": action.error,
            "claim": None,
        }
        return Write(fence, {"$set": _unapplied(changes, settlement)})
    if isinstance(action, Release):
        changes = {"ready_at": truncate_ms(action.due), "deliveries": action.attempt}
        if settlement.suspect:  # stays suspect (its earlier claim was lost); its lease ends
            changes["claim.lease_until"] = truncate_ms(action.due)
        else:
            changes["claim"] = None
        return Write(fence, {"$set": _unapplied(changes, settlement)})
    return None  # DeadLettered: written separately (two collections)


def start_mark(claim: Claim, store: TimerStore) -> Write:
    """Mark ``claim``'s delivery started: ``deliveries`` = its attempt + 1 (a set, not an
    increment, so a repeated write counts it once)."""
    fence = {
        **store.key(claim.item.id),
        "generation": claim.item.generation,
        "claim.token": claim.token,
    }
    return Write(fence, {"$set": {"deliveries": claim.attempt + 1}})


def _unapplied(changes: dict[str, Any], settlement: Settlement) -> dict[str, Any]:
    if settlement.unapply is not None:
        changes["applied"] = optional_ms(settlement.unapply[0])
        changes["runs"] = settlement.unapply[1]
    return changes
