"""flowsched: action timeouts, retries and processing-time deadlines for flow engines."""

from flowsched.clock import ManualClock, SystemClock
from flowsched.flow import (
    ANY_STATE,
    ActionRequest,
    ActionTimeoutEvent,
    Flow,
    FlowDomain,
    ProcessingTimeElapsedEvent,
)
from flowsched.port import ScheduleItem, ScheduleKind, SchedulerPort

__all__ = [
    "ANY_STATE",
    "ActionRequest",
    "ActionTimeoutEvent",
    "Flow",
    "FlowDomain",
    "ManualClock",
    "ProcessingTimeElapsedEvent",
    "ScheduleItem",
    "ScheduleKind",
    "SchedulerPort",
    "SystemClock",
]
