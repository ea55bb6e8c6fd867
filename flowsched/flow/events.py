"""Internal: the events time produces, and the request an action adapter receives.

Flows react to :class:`ActionTimeoutEvent` and :class:`ProcessingTimeElapsedEvent` exactly as
to their own events: declare a transition on the event type in a state
(``.on(ActionTimeoutEvent, in_state="CheckingFraud", action="CheckFraud", go_to=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["ActionRequest", "ActionTimeoutEvent", "ProcessingTimeElapsedEvent"]


@dataclass(frozen=True, slots=True)
class ActionTimeoutEvent:
    """No completing response came for ``action`` (invoked on entering ``state``) in time.

    ``deadline`` is the first invocation plus the configured ``timeout-duration``;
    ``fired_at`` when the flow received the event; ``attempts`` how many times the action had
    been invoked; ``config_key`` the key that set the timeout (``None`` if unknown).
    """

    flow_id: str
    flow: str
    state: str
    action: str
    deadline: datetime | None = None
    fired_at: datetime | None = None
    attempts: int = 1
    config_key: str | None = None


@dataclass(frozen=True, slots=True)
class ProcessingTimeElapsedEvent:
    """The flow did not get from ``source`` to ``destination`` by ``deadline``.

    ``deadline`` is the offset (the one named by ``offset_id``, else the time ``source`` was
    entered) plus the configured ``timeout-duration``.
    """

    flow_id: str
    flow: str
    source: str
    destination: str
    deadline: datetime | None = None
    fired_at: datetime | None = None
    offset_id: str | None = None
    config_key: str | None = None


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What an action adapter receives each time the flow invokes an action.

    ``attempt`` is 1 for the invocation on entering ``state`` and counts up with each retry.
    ``offsets`` is the flow's offset map (system offsets: when each state was entered, under
    the state's name; custom offsets given on start): hand it to a child flow with
    ``domain.start(..., offsets=request.offsets)`` so deadlines can span flows. ``data`` is
    the JSON object the flow was started with. Adapters are called outside the flow's lock:
    they may call back into the domain (``domain.handle``, ``domain.start``).
    """

    flow_id: str
    flow: str
    state: str
    action: str
    attempt: int
    offsets: Mapping[str, datetime]
    data: Mapping[str, Any]
