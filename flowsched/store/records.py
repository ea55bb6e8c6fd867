"""Internal: the typed records a :class:`~flowsched.store.TimerStore` takes and returns.

Values only: frozen, no I/O, every datetime timezone-aware UTC. Nothing a store returns is
``Any``: a database's rows and documents become these records inside the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flowsched.outcomes import Completed, Failure, Outcome
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.steering import TimerState

__all__ = [
    "LOST_TWICE",
    "Claim",
    "QuarantinedRecord",
    "SettleResult",
    "Settlement",
    "TimerSelection",
]

LOST_TWICE = 2
"""A claim with this many lapsed runs before it (:attr:`Claim.lapsed`) is not run: the last
lost run counts as a failed delivery (redelivered with backoff, or dead-lettered). The first
lost run is free: a node dies for many reasons besides its handler."""


@dataclass(frozen=True, slots=True)
class Claim:
    """One due item a node holds: ``owner`` may deliver ``item`` until ``lease_until`` (by
    the store's clock); ``attempt`` counts the failed deliveries of this form before it;
    ``token`` names this claim (fresh at every :meth:`TimerStore.claim_due`, kept by
    :meth:`TimerStore.renew`; a store must set it, ``""`` is for records built by hand).

    The *fence* of a claim is its identity, ``(item.id, item.generation, owner, token)`` as
    the store wrote them - never its ``lease_until``, which a renewal moves:

    * :meth:`TimerStore.confirm_start` and :meth:`TimerStore.renew` apply while the stored
      item carries all four **and** its stored lease has not ended by the store's clock;
    * :meth:`TimerStore.settle` and :meth:`TimerStore.release` apply while the stored item
      carries all four (a settle after the lease ended, nobody having claimed the item
      since, applies and says how late) - but for a late completion
      (:attr:`Settlement.settles_late`), which is fenced on ``(item.id, item.generation)``
      alone.

    So a replaced, cancelled, paused or re-claimed item (by another node or by the same one:
    a new token) is never touched by a stale claim, and a claim whose renewal applied but
    whose reply was lost (the node still holds the old ``lease_until``) still confirms,
    renews and settles. A :meth:`TimerStore.renew` returns new claims (the new
    ``lease_until``, the same token); a node uses them after, but the old ones still hold.

    ``lapsed`` counts the runs of this form that, in a row before this claim, started (their
    start recorded) and were never settled before their lease ended: their node died or was
    cut off, perhaps because of the handler. A claim that takes an item whose earlier claim
    had started and lapsed counts one more; a settle that keeps the item (``Redeliver``,
    ``NextSlot``) and a new form start again from 0; a release, a renewal and a lapse
    before any start change nothing. At :data:`LOST_TWICE` the node counts the last lost
    run as a failed delivery instead of calling the handler again (so a handler that kills
    its node cannot take the cluster down one node at a time, for ever).
    """

    item: ScheduleItem
    attempt: int
    owner: str
    lease_until: datetime
    token: str = ""
    lapsed: int = 0

    @property
    def generation(self) -> int:
        """The claimed form's generation (``item.generation``)."""
        return self.item.generation


@dataclass(frozen=True, slots=True)
class Settlement:
    """What came of one claim: ``outcome`` to apply under the claim's fence.

    ``timed_out`` marks a run that went past its handler's time limit (its history attempt
    ends ``"timed_out"``, not ``"failed"``); ``traceback`` is an excerpt kept in the history.
    """

    claim: Claim
    outcome: Outcome
    timed_out: bool = False
    traceback: str | None = None

    @classmethod
    def of(cls, claim: Claim, outcome: Outcome, *, timed_out: bool = False) -> Settlement:
        """The settlement of a handler's ``outcome``, with what its failure says for the
        history: whether it ran past its time limit, its traceback excerpt."""
        failure = getattr(outcome, "failure", None)
        if not isinstance(failure, Failure):
            return cls(claim, outcome, timed_out)
        return cls(claim, outcome, timed_out or failure.outcome == "timed_out", failure.traceback)

    @property
    def settles_late(self) -> bool:
        """Whether this settlement applies even when its claim no longer holds: a one-shot
        item's :class:`~flowsched.outcomes.Completed`. Its run succeeded, perhaps after its
        lease ended and another claim took the item (a paused node): it settles its
        generation - the item is removed, fenced on id and generation alone, whoever holds
        it now - so successful runs never count as lost ones (CONTRACT section 15). A
        replaced or cancelled form is never touched; a ``NextSlot`` has its slot's own fence,
        and a failure of a claim that no longer holds is stale."""
        return isinstance(self.outcome, Completed) and self.claim.item.recurrence is None


@dataclass(frozen=True, slots=True)
class SettleResult:
    """How one :class:`Settlement` went: ``applied`` is false for a stale claim (the item
    was replaced, cancelled or claimed again meanwhile: nothing changed; a late completion,
    :attr:`Settlement.settles_late`, is stale only if its generation is gone). ``late`` is
    how long after the stored lease's end the store applied it (by its clock; the stored
    lease, which a renewal whose reply was lost may have moved past the claim's
    ``lease_until``; for a late completion whose claim no longer holds, the claim's own
    ``lease_until``), ``None`` when it was in time or not applied."""

    claim: Claim
    applied: bool
    late: timedelta | None = None

    @classmethod
    def at(cls, claim: Claim, now: datetime, ends: datetime) -> SettleResult:
        """``claim``'s settle, applied at ``now``: late if after ``ends``, its lease end."""
        return cls(claim, True, now - ends if now > ends else None)


@dataclass(frozen=True, slots=True)
class TimerSelection:
    """The filters of ``timers()`` (CONTRACT section 18); every one optional.

    ``after`` is the cursor of the previous page (:attr:`TimerPage.next`); results are
    soonest due first, ties by id, so paging is stable while timers come and go."""

    id_prefix: str | None = None
    flow_id: str | None = None
    kind: ScheduleKind | None = None
    handler: str | None = None
    state: TimerState | None = None
    due_from: datetime | None = None
    due_to: datetime | None = None
    limit: int = 50
    after: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or isinstance(self.limit, bool) or self.limit < 1:
            raise ValueError(f"timers: limit must be a positive int, got {self.limit!r}")


@dataclass(frozen=True, slots=True)
class QuarantinedRecord:
    """A stored record the store could not use (a malformed document or row), set aside
    with ``reason`` at ``quarantined_at``; ``record`` is what was stored, as plain data."""

    id: str
    reason: str
    quarantined_at: datetime
    record: Mapping[str, object] = field(default_factory=dict)
