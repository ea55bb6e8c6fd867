"""Internal: the reference :class:`~flowsched.store.TimerStore`: in process, thread-safe, no I/O.

The store under the in-memory schedulers, and the executable meaning of the interface
(:func:`flowsched.testing.check_timer_store`). One lock; items in a dict, claims off a
due-time heap (:mod:`flowsched.store.due_index`), the state of claimed, failed and paused
ids kept only for them, a newly built item stored as it is (no copy); history in
:mod:`flowsched.store.attempt_log`. Time is the injected clock's (default: the system's).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from heapq import heappush

from flowsched.clock import Clock, SystemClock, ensure_utc
from flowsched.errors import SchedulerUnavailable
from flowsched.outcomes import Completed, NextSlot, Outcome, Redeliver
from flowsched.records import DeadLetter, ScheduleItem, set_generation
from flowsched.steering import Attempt, TimerInfo, TimerPage, TimerState
from flowsched.store.attempt_log import AttemptBook, ended_as
from flowsched.store.due_index import COMPACT_AT, DueIndex
from flowsched.store.forms import lease_end, resumed_form
from flowsched.store.info import dead_info, timer_info
from flowsched.store.paging import page_of
from flowsched.store.records import (
    Claim,
    QuarantinedRecord,
    Settlement,
    SettleResult,
    TimerSelection,
)

__all__ = ["MemoryTimerStore"]


@dataclass(slots=True)
class _Lease:
    owner: str
    until: datetime
    token: str


class MemoryTimerStore:
    """The reference timer store (see the module docstring); ``clock`` judges due times."""

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        history_limit: int = 20,
        history_retention: timedelta = timedelta(days=7),
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.history_limit = history_limit
        self.history_retention = history_retention
        self._items: dict[str, ScheduleItem] = {}
        # Sparse: only the ids that are claimed, have failed, or are paused.
        self._leases: dict[str, _Lease] = {}
        self._attempts: dict[str, int] = {}
        self._errors: dict[str, str] = {}
        self._lapsed: dict[str, int] = {}  # lost runs in a row (Claim.lapsed)
        self._paused: set[str] = set()
        self._index = DueIndex()
        self._heap = self._index.heap  # (rebuilt in place)
        self._dead: dict[str, DeadLetter] = {}
        self._quarantine: list[QuarantinedRecord] = []
        self._history = AttemptBook(self.now, self._items, history_limit, history_retention)
        self._generations = itertools.count(1)
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryTimerStore({len(self._items)} items, clock={self.clock!r})"

    def __len__(self) -> int:
        """How many items are scheduled (due or not, claimed or paused)."""
        return len(self._items)

    def now(self) -> datetime:
        return self.clock.now()

    def heap_size(self) -> int:
        """Entries in the due-time heap, stale ones included (bounded: see due_index)."""
        return len(self._index.heap)

    def items(self) -> list[ScheduleItem]:
        """A snapshot of the current forms (not the dead letters)."""
        with self._lock:
            return list(self._items.values())

    # -- items ------------------------------------------------------------------------

    def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        if item.__class__ is not ScheduleItem and not isinstance(item, ScheduleItem):
            raise TypeError(f"put: expected a ScheduleItem, got {type(item).__name__}")
        lock = self._lock
        lock.acquire()  # the hot path: acquire/release is faster than a with-block
        try:
            if self._late(deadline):
                raise SchedulerUnavailable(
                    f"put({item.id!r}): arrived after its deadline {deadline}; nothing applied"
                )
            generation = next(self._generations)
            if item.generation:
                item = item.with_generation(generation)
            else:
                set_generation(item, generation)  # newly built: stored as it is, no copy
            key = item.id
            old = self._items.setdefault(key, item)  # one hash look-up for a new id
            heappush(self._heap, (item.due, generation, key))
            if old is not item or item.flow_id is not None or self._dead:
                self._placed(key, old, item)
            return item
        finally:
            lock.release()

    def _placed(self, key: str, old: ScheduleItem, stored: ScheduleItem) -> None:
        """The rest of storing ``stored`` (in the heap; ``old``: what the dict held)."""
        flow_id = stored.flow_id
        if old is not stored:
            self._items[key] = stored
            self._forget(key, old, flow_id)
            self._compact_if_stale()
        if flow_id is not None:
            self._index.add_flow(flow_id, key)
        if self._dead:
            self._dead.pop(key, None)  # a new schedule supersedes its dead letter

    def get(self, item_id: str) -> ScheduleItem | None:
        return self._items.get(item_id) if isinstance(item_id, str) else None

    def exists(self, item_id: str) -> bool:
        return isinstance(item_id, str) and item_id in self._items

    def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        with self._lock:
            if not isinstance(item_id, str) or self._late(deadline):
                return False
            item = self._items.get(item_id)
            if item is None or (generation is not None and item.generation != generation):
                return False
            self._delete(item_id)
            return True

    def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        with self._lock:
            if not isinstance(flow_id, str) or self._late(deadline):
                return []
            ids = self._index.take_flow(flow_id)
            items, stateful = self._items, self._leases or self._attempts or self._paused
            for item_id in ids:
                del items[item_id]
                if stateful or self._errors:
                    self._forget(item_id, None, None)
            self._compact_if_stale()
            return ids

    # -- claims -----------------------------------------------------------------------

    def claim_due(
        self, routes: Collection[str], owner: str, lease: timedelta, limit: int
    ) -> list[Claim]:
        if lease <= timedelta(0):
            raise ValueError(f"claim_due: lease must be positive, got {lease}")
        if limit < 1:
            raise ValueError(f"claim_due: limit must be at least 1, got {limit!r}")
        with self._lock:
            now = self.now()
            index = self._index
            if index.parked:
                index.unpark(routes)
            found = index.pop_due(now, routes, limit, self._live)
            if self._leases:
                found = self._with_lapsed(found, now, routes, limit)
            until = lease_end(now, lease)
            claims = []
            for item in found:
                key = item.id
                held = self._leases.get(key)
                attempt = self._attempts.get(key, 0)
                if held is not None:  # its lease ended: a run that had started was lost
                    lapsed = Claim(item, attempt, held.owner, held.until)
                    if self._history.close(lapsed, attempt, held.until, "lapsed", None):
                        self._lapsed[key] = self._lapsed.get(key, 0) + 1
                token = f"c{next(self._tokens)}"
                self._leases[key] = _Lease(owner, until, token)
                claims.append(Claim(item, attempt, owner, until, token, self._lapsed.get(key, 0)))
            return claims

    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        with self._lock:
            now = self.now()
            held = [c for c in claims if self._held(c, now) and c.item.id not in self._paused]
            for claim in held:
                self._history.record(claim, now, len(self._items))
            return held

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        with self._lock:
            now = self.now()
            until = lease_end(now, lease)
            renewed = []
            for claim in claims:
                held = self._held(claim, now)
                if held is not None:
                    held.until = until
                    renewed.append(replace(claim, lease_until=until))
            return renewed

    def release(self, claims: Sequence[Claim]) -> int:
        with self._lock:
            released = 0
            for claim in claims:
                key = claim.item.id
                if self._held(claim) is not None:
                    del self._leases[key]
                    if key not in self._paused:
                        self._index.push(self._items[key])
                    released += 1
            return released

    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        with self._lock:
            now = self.now()
            return [self._settle(settlement, now) for settlement in settlements]

    def _settle(self, settlement: Settlement, now: datetime) -> SettleResult:
        claim, key = settlement.claim, settlement.claim.item.id
        held = self._held(claim)
        if held is not None:
            attempt = self._attempts.get(key, 0)
            self._history.close(claim, attempt, now, ended_as(settlement), settlement)
            self._apply(key, settlement.outcome)
            return SettleResult.at(claim, now, held.until)  # the stored lease: maybe renewed
        item = self._items.get(key)
        if settlement.settles_late and item is not None and item.generation == claim.generation:
            self._delete(key)  # a late completion: fenced on id and generation alone
            return SettleResult.at(claim, now, claim.lease_until)
        return SettleResult(claim, False)  # stale

    def next_due(self, routes: Collection[str], after: datetime | None = None) -> datetime | None:
        with self._lock:
            if self._index.parked:
                self._index.unpark(routes)
            head = self._index.head(routes, self._live)
            if head is not None and after is not None and head <= after:
                later = (
                    item.due
                    for key, item in self._items.items()
                    if item.due > after
                    and item.route in routes
                    and key not in self._paused
                    and key not in self._leases
                )
                head = min(later, default=None)
            for key, held in self._leases.items():
                item = self._items[key]
                if item.route not in routes or key in self._paused:
                    continue
                if (after is None or held.until > after) and (head is None or held.until < head):
                    head = held.until
            return head

    # -- dead letters, quarantine -----------------------------------------------------

    def dead_letters(self) -> list[DeadLetter]:
        with self._lock:  # by time, then in the order they died (a stable sort)
            return sorted(self._dead.values(), key=lambda dead: dead.dead_at)

    def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        due = ensure_utc(due, "requeue due")
        with self._lock:
            dead = self._dead.pop(item_id, None) if isinstance(item_id, str) else None
            if dead is None:
                return None
            item = dead.item.moved(due, dead.item.previous)
            stored = item.with_generation(next(self._generations))
            self._index.push(stored)
            self._placed(stored.id, self._items.setdefault(stored.id, stored), stored)
            return stored

    def quarantined(self) -> list[QuarantinedRecord]:
        with self._lock:
            return list(self._quarantine)

    # -- steering ---------------------------------------------------------------------

    def timers(self, query: TimerSelection) -> TimerPage:
        with self._lock:
            now = self.now()
            infos = [self._info(item, now) for item in self._items.values()]
            infos += [dead_info(dead) for dead in self._dead.values()]
        return page_of(infos, query)

    def history(self, item_id: str) -> list[Attempt]:
        with self._lock:
            return self._history.history(item_id)

    def pause(self, item_id: str) -> bool:
        with self._lock:
            if not self.exists(item_id):
                return False
            self._paused.add(item_id)  # its heap entry is dropped when met
            return True

    def resume(self, item_id: str) -> bool:
        with self._lock:
            item = self._items.get(item_id) if isinstance(item_id, str) else None
            if item is None:
                return False
            if item_id not in self._paused:
                return True
            claimed = item_id in self._leases
            item = resumed_form(item, self.now(), claimed)
            self._items[item_id] = item
            self._paused.discard(item_id)
            if not claimed:
                self._index.push(item)
            return True

    # -- internals (under the lock) ---------------------------------------------------

    def _live(self, entry: tuple[datetime, int, str]) -> ScheduleItem | None:
        """The item ``entry`` stands for, if it is still claimable (current, unclaimed,
        not paused, due then)."""
        due, generation, key = entry
        item = self._items.get(key)
        if (
            item is None
            or item.generation != generation
            or item.due != due
            or key in self._leases
            or key in self._paused
        ):
            return None
        return item

    def _with_lapsed(
        self, found: list[ScheduleItem], now: datetime, routes: Collection[str], limit: int
    ) -> list[ScheduleItem]:
        """``found`` and the claimed items whose lease ended, the ``limit`` first in due
        order (the rest back in the heap)."""
        lapsed = [
            item
            for key, held in self._leases.items()
            if held.until <= now
            and (item := self._items[key]).due <= now
            and item.route in routes
            and key not in self._paused
        ]
        if not lapsed:
            return found
        both = sorted(found + lapsed, key=lambda item: (item.due, item.generation))
        for item in both[limit:]:
            if item.id not in self._leases:
                self._index.push(item)
        return both[:limit]

    def _held(self, claim: Claim, now: datetime | None = None) -> _Lease | None:
        """The lease ``claim`` still holds: its identity (id, generation, owner, token) is
        the stored one and, given ``now``, the stored lease has not ended by then."""
        key = claim.item.id
        held = self._leases.get(key)
        if (
            held is None
            or held.owner != claim.owner
            or held.token != claim.token
            or self._items[key].generation != claim.generation
            or (now is not None and held.until <= now)
        ):
            return None
        return held

    def _apply(self, key: str, outcome: Outcome) -> None:
        del self._leases[key]
        self._lapsed.pop(key, None)  # settled: no run lost since
        item = self._items[key]
        if isinstance(outcome, Completed):
            self._delete(key)
            return
        if isinstance(outcome, Redeliver):
            # The slot was not applied: previous and runs stay as claimed.
            moved = item.moved(outcome.due, item.previous, item.runs)
            self._attempts[key] = outcome.attempt
        elif isinstance(outcome, NextSlot):
            # The slot applied and the run counted in this one fenced write.
            moved = item.moved(outcome.due, outcome.applied, outcome.runs)
            self._attempts.pop(key, None)
        else:  # DeadLettered, Exhausted: set aside with the reason
            self._delete(key)
            self._dead[key] = outcome.dead
            return
        if outcome.error is not None:
            self._errors[key] = outcome.error
        elif self._errors:
            self._errors.pop(key, None)
        self._items[key] = moved
        if key not in self._paused:
            self._index.push(moved)

    def _delete(self, key: str) -> None:
        item = self._items.pop(key)
        self._forget(key, item, None)
        self._compact_if_stale()

    def _forget(self, key: str, old: ScheduleItem | None, flow_id: str | None) -> None:
        """Drop the state of ``old``, a form of ``key`` that is no longer current (its
        successor, if any, belongs to ``flow_id``; ``None``: its flow is gone already)."""
        if self._leases:
            self._leases.pop(key, None)
        if self._attempts:
            self._attempts.pop(key, None)
        if self._errors:
            self._errors.pop(key, None)
        if self._lapsed:
            self._lapsed.pop(key, None)
        if self._paused:
            self._paused.discard(key)
        if old is not None and old.flow_id is not None and old.flow_id != flow_id:
            self._index.drop_flow(old.flow_id, key)

    def _compact_if_stale(self) -> None:
        size = len(self._index.heap)
        if size > COMPACT_AT and size > 2 * len(self._items):
            leases, paused = self._leases, self._paused
            self._index.rebuild(
                (item.due, item.generation, key)
                for key, item in self._items.items()
                if key not in leases and key not in paused
            )

    def _info(self, item: ScheduleItem, now: datetime) -> TimerInfo:
        key = item.id
        held = self._leases.get(key)
        claimed = held is not None and held.until > now
        state: TimerState = (
            "paused" if key in self._paused else "claimed" if claimed else "scheduled"
        )
        owner, until = (held.owner, held.until) if claimed and held else (None, None)
        attempt, error = self._attempts.get(key, 0), self._errors.get(key)
        return timer_info(item, state, attempt, error, owner, until)

    def _late(self, deadline: datetime | None) -> bool:
        return deadline is not None and self.now() > deadline
