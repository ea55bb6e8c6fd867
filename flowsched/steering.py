"""Internal: the records of steering timers from Python (CONTRACT section 18).

``TimerInfo`` (one stored timer, as the query calls, the CLI and the console show it),
``TimerPage`` (one page of a query, with the cursor of the next) and ``Attempt`` (one
delivery attempt in an item's history). Values only: frozen, no I/O, every datetime
timezone-aware UTC. Import them from ``flowsched``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from flowsched.records import ScheduleKind
from flowsched.recurrence import Recurrence

__all__ = ["Attempt", "AttemptOutcome", "TimerInfo", "TimerPage", "TimerState"]

TimerState = Literal["scheduled", "claimed", "paused", "dead"]
"""Where a timer stands: waiting for its due time, claimed by a node (``node`` and
``lease_until`` say which and until when), paused (fires nothing until resumed), or set aside
as a dead letter."""

AttemptOutcome = Literal["succeeded", "failed", "timed_out", "lapsed"]
"""How an attempt ended: its handler returned, raised, ran past its time limit, or its node's
lease ran out before an outcome was written (the node died or was cut off)."""

TIMER_STATES: tuple[TimerState, ...] = ("scheduled", "claimed", "paused", "dead")
ATTEMPT_OUTCOMES: tuple[AttemptOutcome, ...] = ("succeeded", "failed", "timed_out", "lapsed")


@dataclass(frozen=True, slots=True)
class TimerInfo:
    """One stored timer as ``timers()`` lists it.

    ``attempts`` counts the failed deliveries of the current form; ``last_error`` is the
    latest failure's text; ``node`` and ``lease_until`` are set while a node holds a claim
    (``state == "claimed"``, or ``"paused"`` while the delivery it paused runs);
    ``payload_size`` is the payload's encoded size in bytes (``payload`` is the decoded
    object, ``None`` when the timer has none).
    """

    id: str
    kind: ScheduleKind
    handler: str | None
    flow_id: str | None
    due: datetime
    state: TimerState
    attempts: int = 0
    last_error: str | None = None
    node: str | None = None
    lease_until: datetime | None = None
    recurrence: Recurrence | None = None
    payload_size: int = 0
    payload: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class TimerPage:
    """One page of ``timers()``: ``items`` soonest due first; ``next`` is the cursor to pass
    as ``after=`` for the following page, ``None`` on the last page."""

    items: list[TimerInfo]
    next: str | None = None

    def __iter__(self) -> Any:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One delivery attempt of a timer, as ``history(item_id)`` lists it (oldest first).

    ``started`` is when the node recorded the start, by the store's clock; ``ended`` is
    ``None`` while the attempt runs. ``outcome`` is ``None`` while it runs, else one of
    ``"succeeded"``, ``"failed"``, ``"timed_out"``, ``"lapsed"``. ``traceback`` is an excerpt
    (the last frames), ``None`` when the attempt did not raise.
    """

    node: str
    started: datetime
    ended: datetime | None = None
    outcome: AttemptOutcome | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    generation: int | None = None
    attempt: int = 0
