"""Internal: what happened to flow instances, in order (``TimelineEntry``), for listeners.

The domain reports every state entry, action invocation, timer scheduled, cancelled or
fired, and every event it ignored, as a :class:`TimelineEntry` to the listeners given with
``FlowDomain.builder().with_listener(...)``. Listeners are called after the change is stored,
outside the instance's lock, on whichever thread made the change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

__all__ = ["Happened", "Listener", "TimelineEntry"]


class Happened(StrEnum):
    """Kinds of :class:`TimelineEntry`."""

    STARTED = "started"
    ENTERED = "entered"
    INVOKED = "invoked"
    RESPONDED = "responded"
    SCHEDULED = "scheduled"
    CANCELLED = "cancelled"
    FIRED = "fired"
    IGNORED = "ignored"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """``what`` happened to ``flow_id`` at ``at``; ``detail`` says it in words,
    ``config_key`` names the configuration key that decided it (when one did) and ``due``
    is the due time of a timer that was ``SCHEDULED``."""

    at: datetime
    flow_id: str
    flow: str
    what: Happened
    detail: str
    config_key: str | None = None
    due: datetime | None = None

    def __str__(self) -> str:
        due = f", due {self.due.isoformat()}" if self.due is not None else ""
        key = f"  [{self.config_key}]" if self.config_key else ""
        return f"{self.at.isoformat()} {self.flow_id} {self.what.value:<9} {self.detail}{due}{key}"


Listener = Callable[[TimelineEntry], None]
"""Receives each :class:`TimelineEntry`; must not raise (errors are logged and dropped)."""
