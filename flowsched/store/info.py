"""Internal: a :class:`~flowsched.TimerInfo` from what every store knows of a timer, written
once for all stores."""

from __future__ import annotations

from datetime import datetime

from flowsched.records import DeadLetter, ScheduleItem
from flowsched.steering import TimerInfo, TimerState

__all__ = ["dead_info", "timer_info"]


def timer_info(
    item: ScheduleItem,
    state: TimerState,
    attempts: int,
    last_error: str | None,
    node: str | None = None,
    lease_until: datetime | None = None,
) -> TimerInfo:
    """``item`` as ``timers()`` lists it: ``node`` and ``lease_until`` (a claim whose lease
    has not ended: the caller's to judge) only while claimed, or paused while claimed."""
    payload = item._payload
    claimed = state in ("claimed", "paused")
    return TimerInfo(
        id=item.id,
        kind=item.kind,
        handler=item.handler,
        flow_id=item.flow_id,
        due=item.due,
        state=state,
        attempts=attempts,
        last_error=last_error,
        node=node if claimed else None,
        lease_until=lease_until if claimed else None,
        recurrence=item.recurrence,
        payload_size=len(payload.encode()) if payload is not None else 0,
        payload=item.payload,
    )


def dead_info(dead: DeadLetter) -> TimerInfo:
    """A dead letter as ``timers()`` lists it (``state="dead"``)."""
    return timer_info(dead.item, "dead", dead.attempts, dead.error)
