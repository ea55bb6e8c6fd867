"""Internal: the reference :class:`~flowsched.store.TimerStore`: in process, thread-safe, no I/O.

Every operation takes one lock and works on plain dicts; claims scan the items (O(n)): this
store is the executable meaning of the interface, checked by
:func:`flowsched.testing.check_timer_store`, not a fast path (``InMemoryScheduler`` keeps
its own heap, :mod:`flowsched.memory.store`). Time is the injected clock's (a
:class:`~flowsched.SystemClock` by default).

History: the last ``history_limit`` attempts per id (default 20), kept after the item is
gone for ``history_retention`` (default 7 days), both judged by the store's clock.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from flowsched.clock import Clock, SystemClock, ensure_utc
from flowsched.errors import SchedulerUnavailable
from flowsched.outcomes import Completed, DeadLettered, NextSlot, Outcome, Redeliver
from flowsched.records import DeadLetter, ScheduleItem, set_generation
from flowsched.steering import Attempt, AttemptOutcome, TimerInfo, TimerPage, TimerState
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
class _Row:
    item: ScheduleItem
    attempt: int = 0
    owner: str | None = None
    lease_until: datetime | None = None
    token: str = ""
    paused: bool = False
    last_error: str | None = None


class MemoryTimerStore:
    """The reference timer store (see the module docstring); ``clock`` judges due times."""

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        history_limit: int = 20,
        history_retention: timedelta = timedelta(days=7),
    ) -> None:
        if history_limit < 1:
            raise ValueError(f"history_limit must be at least 1, got {history_limit!r}")
        self.clock: Clock = clock or SystemClock()
        self.history_limit = history_limit
        self.history_retention = history_retention
        self._rows: dict[str, _Row] = {}
        self._dead: dict[str, DeadLetter] = {}
        self._quarantine: list[QuarantinedRecord] = []
        self._history: dict[str, deque[Attempt]] = {}
        self._generations = itertools.count(1)
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryTimerStore({len(self._rows)} items, clock={self.clock!r})"

    def now(self) -> datetime:
        return self.clock.now()

    # -- items ------------------------------------------------------------------------

    def put(self, item: ScheduleItem, *, deadline: datetime | None = None) -> ScheduleItem:
        if not isinstance(item, ScheduleItem):
            raise TypeError(f"put: expected a ScheduleItem, got {type(item).__name__}")
        with self._lock:
            self._check_deadline(deadline, f"put({item.id!r})")
            generation = next(self._generations)
            if item.generation:
                stored = item.with_generation(generation)
            else:
                stored = item
                set_generation(item, generation)
            self._rows[stored.id] = _Row(stored)
            self._dead.pop(stored.id, None)
            return stored

    def get(self, item_id: str) -> ScheduleItem | None:
        with self._lock:
            row = self._rows.get(item_id) if isinstance(item_id, str) else None
            return row.item if row is not None else None

    def exists(self, item_id: str) -> bool:
        return isinstance(item_id, str) and item_id in self._rows

    def remove(
        self, item_id: str, *, generation: int | None = None, deadline: datetime | None = None
    ) -> bool:
        with self._lock:
            if not isinstance(item_id, str) or self._late(deadline):
                return False
            row = self._rows.get(item_id)
            if row is None or (generation is not None and row.item.generation != generation):
                return False
            del self._rows[item_id]
            return True

    def remove_flow(self, flow_id: str, *, deadline: datetime | None = None) -> list[str]:
        with self._lock:
            if not isinstance(flow_id, str) or self._late(deadline):
                return []
            ids = sorted(i for i, row in self._rows.items() if row.item.flow_id == flow_id)
            for item_id in ids:
                del self._rows[item_id]
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
            due = [
                row
                for row in self._rows.values()
                if row.item.route in routes
                and not row.paused
                and row.item.due <= now
                and (row.lease_until is None or row.lease_until <= now)
            ]
            due.sort(key=lambda row: (row.item.due, row.item.generation))
            claims = []
            for row in due[:limit]:
                if row.owner is not None and row.lease_until is not None:
                    self._close(row, row.lease_until, "lapsed", None)
                row.owner, row.lease_until = owner, now + lease
                row.token = f"c{next(self._tokens)}"
                claims.append(Claim(row.item, row.attempt, owner, row.lease_until, row.token))
            return claims

    def confirm_start(self, claims: Sequence[Claim]) -> list[Claim]:
        with self._lock:
            now = self.now()
            held = []
            for claim in claims:
                row = self._held(claim, now)
                if row is None or row.paused:
                    continue
                self._record(claim, now)
                held.append(claim)
            return held

    def renew(self, claims: Sequence[Claim], lease: timedelta) -> list[Claim]:
        with self._lock:
            now = self.now()
            until = now + lease
            renewed = []
            for claim in claims:
                row = self._held(claim, now)
                if row is not None:
                    row.lease_until = until
                    renewed.append(replace(claim, lease_until=until))
            return renewed

    def release(self, claims: Sequence[Claim]) -> int:
        with self._lock:
            released = 0
            for claim in claims:
                row = self._held(claim)
                if row is not None:
                    row.owner = row.lease_until = None
                    row.token = ""
                    released += 1
            return released

    def settle(self, settlements: Sequence[Settlement]) -> list[SettleResult]:
        with self._lock:
            now = self.now()
            results = []
            for settlement in settlements:
                claim = settlement.claim
                row = self._held(claim)
                if row is None:
                    results.append(SettleResult(claim, False))
                    continue
                ends = row.lease_until or claim.lease_until  # the stored lease: maybe renewed
                self._close(row, now, _ended_as(settlement), settlement)
                self._apply(row, settlement.outcome)
                late = now - ends if now > ends else None
                results.append(SettleResult(claim, True, late))
            return results

    def next_due(self, routes: Collection[str], after: datetime | None = None) -> datetime | None:
        with self._lock:
            times = [
                row.lease_until if row.lease_until is not None else row.item.due
                for row in self._rows.values()
                if row.item.route in routes and not row.paused
            ]
            return min((t for t in times if after is None or t > after), default=None)

    # -- dead letters, quarantine -----------------------------------------------------

    def dead_letters(self) -> list[DeadLetter]:
        with self._lock:
            return sorted(self._dead.values(), key=lambda dead: (dead.dead_at, dead.item.id))

    def requeue(self, item_id: str, due: datetime) -> ScheduleItem | None:
        due = ensure_utc(due, "requeue due")
        with self._lock:
            dead = self._dead.pop(item_id, None) if isinstance(item_id, str) else None
            if dead is None:
                return None
            item = dead.item.moved(due, dead.item.previous)
            stored = item.with_generation(next(self._generations))
            self._rows[stored.id] = _Row(stored)
            return stored

    def quarantined(self) -> list[QuarantinedRecord]:
        with self._lock:
            return list(self._quarantine)

    # -- steering ---------------------------------------------------------------------

    def timers(self, query: TimerSelection) -> TimerPage:
        with self._lock:
            now = self.now()
            infos = [_info(row, now) for row in self._rows.values()]
            infos += [dead_info(dead) for dead in self._dead.values()]
        return page_of(infos, query)

    def history(self, item_id: str) -> list[Attempt]:
        with self._lock:
            self._purge_history()
            return list(self._history.get(item_id, ())) if isinstance(item_id, str) else []

    def pause(self, item_id: str) -> bool:
        with self._lock:
            row = self._rows.get(item_id) if isinstance(item_id, str) else None
            if row is None:
                return False
            row.paused = True
            return True

    def resume(self, item_id: str) -> bool:
        with self._lock:
            row = self._rows.get(item_id) if isinstance(item_id, str) else None
            if row is None:
                return False
            if row.paused and row.item.recurrence is None and row.owner is None:
                now = self.now()
                if row.item.due < now:  # a one-shot whose time passed is due now
                    row.item = row.item.moved(now, row.item.previous)
            elif row.paused and row.item.recurrence is not None:
                try:
                    following = row.item.recurrence.next_slot(self.now())
                except ValueError:
                    following = row.item.due  # no slot left: the next tick sets it aside
                if following > row.item.due:
                    # Missed slots are not replayed: the last one missed counts as applied.
                    row.item = row.item.moved(following, max(row.item.due, self.now()))
            row.paused = False
            return True

    # -- internals (under the lock) ---------------------------------------------------

    def _held(self, claim: Claim, now: datetime | None = None) -> _Row | None:
        """The row ``claim`` still holds: its identity (id, generation, owner, token) is
        the stored one and, given ``now``, the stored lease has not ended by then."""
        row = self._rows.get(claim.item.id)
        if (
            row is None
            or row.item.generation != claim.generation
            or row.owner != claim.owner
            or row.token != claim.token
            or row.lease_until is None
            or (now is not None and row.lease_until <= now)
        ):
            return None
        return row

    def _apply(self, row: _Row, outcome: Outcome) -> None:
        item = row.item
        row.owner = row.lease_until = None
        row.token = ""
        if isinstance(outcome, Completed):
            del self._rows[item.id]
        elif isinstance(outcome, Redeliver):
            # The slot was not applied: previous and runs stay as claimed.
            row.item = item.moved(outcome.due, item.previous, item.runs)
            row.attempt, row.last_error = outcome.attempt, outcome.error
        elif isinstance(outcome, NextSlot):
            # The slot applied and the run counted in this one fenced write.
            row.item = item.moved(outcome.due, outcome.applied, outcome.runs)
            row.attempt, row.last_error = 0, outcome.error
        else:  # DeadLettered, Exhausted: set aside with the reason
            del self._rows[item.id]
            self._dead[item.id] = outcome.dead

    def _record(self, claim: Claim, now: datetime) -> None:
        attempts = self._history.setdefault(claim.item.id, deque(maxlen=self.history_limit))
        attempts.append(
            Attempt(claim.owner, now, generation=claim.generation, attempt=claim.attempt)
        )
        if len(self._history) > 2 * len(self._rows) + 1024:
            self._purge_history()

    def _close(
        self, row: _Row, ended: datetime, outcome: AttemptOutcome, settlement: Settlement | None
    ) -> None:
        attempts = self._history.get(row.item.id)
        if not attempts:
            return
        last = attempts[-1]
        if (
            last.ended is not None
            or last.node != row.owner
            or last.generation != row.item.generation
            or last.attempt != row.attempt
        ):
            return
        error_type = error_message = None
        error = _error_of(settlement.outcome) if settlement is not None else None
        if error is not None:
            error_type, _, error_message = error.partition(": ")
        attempts[-1] = replace(
            last,
            ended=ended,
            outcome=outcome,
            error_type=error_type,
            error_message=error_message,
            traceback=settlement.traceback if settlement is not None else None,
        )

    def _purge_history(self) -> None:
        horizon = self.now() - self.history_retention
        for item_id in [
            item_id
            for item_id, attempts in self._history.items()
            if item_id not in self._rows
            and attempts
            and (attempts[-1].ended or attempts[-1].started) < horizon
        ]:
            del self._history[item_id]

    def _check_deadline(self, deadline: datetime | None, what: str) -> None:
        if self._late(deadline):
            raise SchedulerUnavailable(
                f"{what}: arrived after its deadline {deadline}; nothing was applied"
            )

    def _late(self, deadline: datetime | None) -> bool:
        return deadline is not None and self.now() > deadline


def _error_of(outcome: Outcome) -> str | None:
    if isinstance(outcome, Redeliver | NextSlot):
        return outcome.error
    if isinstance(outcome, DeadLettered):
        return outcome.dead.error
    return None


def _ended_as(settlement: Settlement) -> AttemptOutcome:
    if settlement.timed_out:
        return "timed_out"
    return "failed" if _error_of(settlement.outcome) is not None else "succeeded"


def _info(row: _Row, now: datetime) -> TimerInfo:
    claimed = row.lease_until is not None and row.lease_until > now
    state: TimerState = "paused" if row.paused else "claimed" if claimed else "scheduled"
    return timer_info(row.item, state, row.attempt, row.last_error, row.owner, row.lease_until)
