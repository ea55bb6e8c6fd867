"""Internal: the ids and payloads of the flow domain's timers, built and read back.

Ids are derived from the flow id, the state *and its entry number*, the action (or the
destination) and the kind, so replaying a step schedules the same ids again and replaces
rather than duplicates. The entry number keeps the timers of different entries of one state
apart: a decision that loses a race against another node (it decided on an older entry) only
ever writes ids of that older entry, never replacing the winner's timers (which it would
then drop as stale when they fire). The
payload holds names and counters only (never flow data): enough to tell, when the timer
fires, whether it still concerns the instance as it is now. Every timer is addressed to its
flow's handler (:func:`flow_handler`), so only a domain that runs the flow receives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowsched.clock import ensure_utc
from flowsched.records import ScheduleItem, ScheduleKind

__all__ = [
    "FLOW_TIMER_KINDS",
    "ActionTimer",
    "DeadlineTimer",
    "action_timer_id",
    "deadline_timer_id",
    "flow_handler",
]

FLOW_TIMER_KINDS = frozenset(
    {ScheduleKind.ACTION_TIMEOUT, ScheduleKind.ACTION_RETRY, ScheduleKind.PROCESSING_TIMEOUT}
)
"""The kinds of the timers a flow domain schedules (each payload names its ``flow``)."""


def flow_handler(flow: str) -> str:
    """The handler name every timer of ``flow`` is addressed to (the domain registers it).

    >>> flow_handler("CreditTransfer")
    'flow:CreditTransfer'
    """
    return f"flow:{flow}"


def action_timer_id(flow_id: str, state: str, entry: int, action: str, kind: ScheduleKind) -> str:
    """``"<kind>:<flow id>:<state>#<entry>:<action>"`` (``entry``: the instance's entry
    number when it entered ``state``).

    >>> action_timer_id("tx-1", "CheckingFraud", 2, "CheckFraud", ScheduleKind.ACTION_RETRY)
    'action_retry:tx-1:CheckingFraud#2:CheckFraud'
    """
    return f"{kind.value.lower()}:{flow_id}:{state}#{entry}:{action}"


def deadline_timer_id(flow_id: str, source: str, entry: int, destination: str) -> str:
    """``"processing_timeout:<flow id>:<source>#<entry>:<destination>"``.

    >>> deadline_timer_id("tx-1", "ValidatingSchemeRules", 1, "Complete")
    'processing_timeout:tx-1:ValidatingSchemeRules#1:Complete'
    """
    kind = ScheduleKind.PROCESSING_TIMEOUT.value.lower()
    return f"{kind}:{flow_id}:{source}#{entry}:{destination}"


@dataclass(frozen=True, slots=True)
class ActionTimer:
    """An action timeout or retry: ``attempt`` is the invocation the retry will make
    (2 for the first retry); ``deadline`` the action's timeout, if any."""

    flow: str
    state: str
    action: str
    entry: int
    attempt: int = 1
    deadline: datetime | None = None

    def item(self, flow_id: str, kind: ScheduleKind, due: datetime) -> ScheduleItem:
        payload: dict[str, Any] = {
            "flow": self.flow,
            "state": self.state,
            "action": self.action,
            "entry": self.entry,
            "attempt": self.attempt,
            "deadline": None if self.deadline is None else self.deadline.isoformat(),
        }
        item_id = action_timer_id(flow_id, self.state, self.entry, self.action, kind)
        return ScheduleItem(
            item_id, kind, due, flow_id=flow_id, payload=payload, handler=flow_handler(self.flow)
        )

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ActionTimer:
        deadline = payload.get("deadline")
        return cls(
            flow=str(payload["flow"]),
            state=str(payload["state"]),
            action=str(payload["action"]),
            entry=int(payload["entry"]),
            attempt=int(payload.get("attempt", 1)),
            deadline=None if deadline is None else ensure_utc(datetime.fromisoformat(deadline)),
        )


@dataclass(frozen=True, slots=True)
class DeadlineTimer:
    """A processing-time deadline set on the ``entry``-th state entry (into ``source``)."""

    flow: str
    source: str
    destination: str
    entry: int
    offset_id: str | None = None

    def item(self, flow_id: str, due: datetime) -> ScheduleItem:
        payload: dict[str, Any] = {
            "flow": self.flow,
            "source": self.source,
            "destination": self.destination,
            "entry": self.entry,
            "offset_id": self.offset_id,
        }
        item_id = deadline_timer_id(flow_id, self.source, self.entry, self.destination)
        return ScheduleItem(
            item_id,
            ScheduleKind.PROCESSING_TIMEOUT,
            due,
            flow_id=flow_id,
            payload=payload,
            handler=flow_handler(self.flow),
        )

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> DeadlineTimer:
        offset_id = payload.get("offset_id")
        return cls(
            flow=str(payload["flow"]),
            source=str(payload["source"]),
            destination=str(payload["destination"]),
            entry=int(payload["entry"]),
            offset_id=None if offset_id is None else str(offset_id),
        )
