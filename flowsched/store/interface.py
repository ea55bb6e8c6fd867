"""Internal: the store interface a node core drives: TimerStore and AsyncTimerStore.

**Synchronous with an async twin.** The interface is a synchronous :class:`~typing.Protocol`;
:class:`AsyncTimerStore` has the same method names and meanings as coroutines. A driver of
the thread face calls a ``TimerStore``, a driver of the asyncio face awaits an
``AsyncTimerStore``; the node core (:mod:`flowsched.node`) is written once above both and
never calls a store itself. psycopg and pymongo each have a sync and an async client, so a
database store is written as the pair (its statements shared, named once); a store with no
I/O (:class:`~flowsched.store.MemoryTimerStore`) gets its async face from
:func:`flowsched.store.as_async`.

**Time.** Every due time and lease is judged by :meth:`TimerStore.now`, the store's clock: a
database's own time where it has one (compared in the query, nothing estimated), the
injected clock otherwise (and in tests, where a ``clock=`` is given).

**Generation and fence.** :meth:`TimerStore.put` gives each new form of an id a fresh
generation, never 0 and different from the earlier ones of that id (a counter, a sequence,
or MongoDB's random 63-bit numbers); a redelivery or a recurring tick keeps it. A claim
is fenced by its identity ``(id, generation, owner, token)``, never by its lease end (see
:class:`~flowsched.store.Claim` for the exact rule): ``confirm_start`` and ``renew`` also
need the stored lease not ended by the store's clock; ``settle`` and ``release`` need the
identity alone. So a renewal that applied but whose reply was lost leaves the node's claim
valid, and a re-claim (by any node, the same one included) makes the old claim stale.
A write that arrives after its caller gave up applies nothing when it carries a
``deadline`` (compared with the store's clock): so a late cancel never removes a newer form.

**Errors.** A store raises :class:`~flowsched.SchedulerUnavailable` when nothing was sent or
nothing applied (an unreachable server, a passed deadline), and
:class:`~flowsched.OutcomeUnknown` when a write was sent and its result is unknown. Anything
else is a bug in the caller's arguments (``ValueError``/``TypeError`` naming the argument).

Every store passes :func:`flowsched.testing.check_timer_store`;
:func:`flowsched.testing.store_guarantees` lists what it checks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from flowsched.records import DeadLetter, ScheduleItem
from flowsched.steering import Attempt, TimerPage
from flowsched.store.records import (
    Claim,
    QuarantinedRecord,
    Settlement,
    SettleResult,
    TimerSelection,
)

__all__ = ["AsyncTimerStore", "TimerStore"]


@runtime_checkable
class TimerStore(Protocol):
    """The operations a node and the scheduler port need from storage (synchronous face)."""

    def now(self) -> datetime:
        """The store's clock (timezone-aware UTC): what due times and leases are judged by."""
        ...

    def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        """Store ``item`` as the current form of its id, under a fresh generation (never 0,
        unlike the id's earlier ones), replacing any earlier form (claimed, paused or
        dead: a replacement is scheduled, unclaimed, with no failures) and return the
        stored form. A newly built item (generation 0) may be returned itself, its
        generation set. ``deadline``: if the store's clock is past it, nothing is stored
        and :class:`~flowsched.SchedulerUnavailable` is raised."""
        ...

    def get(self, item_id: str) -> ScheduleItem | None:
        """The current form of ``item_id`` (scheduled, claimed or paused; not a dead letter)."""
        ...

    def exists(self, item_id: str) -> bool:
        """Whether ``item_id`` has a current form (a paused item exists; a dead letter not)."""
        ...

    def remove(
        self,
        item_id: str,
        *,
        generation: int | None = None,
        deadline: datetime | None = None,
    ) -> bool:
        """Remove the current form of ``item_id``; True if one was removed. Idempotent.

        ``generation``: remove only that form (a newer one stays). ``deadline``: if the
        store's clock is past it, nothing is removed (False): a cancel that arrives after
        its caller gave up never removes a form scheduled meanwhile."""
        ...

    def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        """Remove every current item of ``flow_id``; return their ids (sorted). With a
        passed ``deadline``, nothing (``[]``)."""
        ...

    def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        """Claim up to ``limit`` items due by the store's clock, soonest due first, whose
        route is in ``routes``, not paused, and not held by a live lease: each becomes
        ``owner``'s until ``now() + lease``. An item whose lease ended is claimable again,
        its ``attempt`` kept (its open history attempt ends ``"lapsed"``)."""
        ...

    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        """The check right before handlers start: of ``claims``, those still held (identity
        intact, the *stored* lease not ended by the store's clock), in order; the very
        objects passed in. Records each start in the
        item's history (an open :class:`~flowsched.Attempt`, ``started`` by the store's
        clock). A claim not returned must not start."""
        ...

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        """Extend the leases of ``claims`` still held (identity intact, the stored lease not
        ended by the store's clock) to ``now() + lease``; return the renewed claims (new
        ``lease_until``, same token), in order. A claim from before an earlier renewal (whose
        reply was lost) still renews."""
        ...

    def release(self, claims: Sequence[Claim]) -> int:
        """Give back claims that never started (a node shutting down): still-held ones are
        claimable again at once, attempts unchanged. Returns how many were released."""
        ...

    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        """Apply each outcome under its claim's fence (its identity: a claim from before a
        renewal still settles), in one batch; one result per settlement, in order. A stale
        claim applies nothing (``applied`` False); ``late`` is measured from the stored lease.
        But a late completion (:attr:`Settlement.settles_late`: a one-shot ``Completed``)
        is fenced on id and generation alone: it removes its generation although another
        claim took it, ``late`` measured from the claim's own ``lease_until``.
        Closes the attempt in the history. Raises (applying nothing, or
        :class:`~flowsched.OutcomeUnknown`) when the store cannot be written: the caller
        keeps the outcomes and retries them (settling twice is harmless: the second is
        stale)."""
        ...

    def next_due(self, routes: Collection[str], after: datetime | None = None) -> datetime | None:
        """The earliest time :meth:`claim_due` could return something for ``routes``: the
        soonest due of unclaimed, unpaused items and the soonest lease end of claimed ones
        (may be in the past), strictly after ``after`` if given; ``None`` when none."""
        ...

    def dead_letters(self) -> list[DeadLetter]:
        """The dead letters, oldest first."""
        ...

    def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        """Schedule dead letter ``item_id`` again at ``due``, under a fresh generation with
        no failures; the stored form, or ``None`` if there is no such dead letter."""
        ...

    def quarantined(self) -> list[QuarantinedRecord]:
        """Records the store could not use, set aside with the reason, oldest first."""
        ...

    def timers(self, query: TimerSelection) -> TimerPage:
        """One page of stored timers (dead letters included, ``state="dead"``) matching
        ``query``, soonest due first, ties by id; ``next`` the cursor of the following page."""
        ...

    def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first (bounded; kept after the item
        is gone, for the retention the store documents)."""
        ...

    def pause(self, item_id: str) -> bool:
        """Pause ``item_id``: it is claimed by nobody until resumed (a run already confirmed
        may finish). False for an unknown id."""
        ...

    def resume(self, item_id: str) -> bool:
        """Resume ``item_id``: a recurring item goes on at its next slot after now (missed
        ones not replayed), a one-shot is due as it was (now, if its time passed). False for
        an unknown id."""
        ...


@runtime_checkable
class AsyncTimerStore(Protocol):
    """:class:`TimerStore` as coroutines: the same names, arguments and meanings."""

    async def now(self) -> datetime: ...

    async def put(
        self, item: ScheduleItem, *, deadline: datetime | None = None
    ) -> ScheduleItem: ...

    async def get(self, item_id: str) -> ScheduleItem | None: ...

    async def exists(self, item_id: str) -> bool: ...

    async def remove(
        self,
        item_id: str,
        *,
        generation: int | None = None,
        deadline: datetime | None = None,
    ) -> bool: ...

    async def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]: ...

    async def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]: ...

    async def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]: ...

    async def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]: ...

    async def release(self, claims: Sequence[Claim]) -> int: ...

    async def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]: ...

    async def next_due(
        self, routes: Collection[str], after: datetime | None = None
    ) -> datetime | None: ...

    async def dead_letters(self) -> list[DeadLetter]: ...

    async def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None: ...

    async def quarantined(self) -> list[QuarantinedRecord]: ...

    async def timers(self, query: TimerSelection) -> TimerPage: ...

    async def history(self, item_id: str) -> list[Attempt]: ...

    async def pause(self, item_id: str) -> bool: ...

    async def resume(self, item_id: str) -> bool: ...
