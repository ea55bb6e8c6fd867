"""flowsched: action timeouts, retries and processing-time deadlines for flow engines."""

from flowsched.clock import ManualClock, SystemClock
from flowsched.memory import InMemoryScheduler
from flowsched.port import ScheduleItem, ScheduleKind, SchedulerPort

__all__ = [
    "InMemoryScheduler",
    "ManualClock",
    "ScheduleItem",
    "ScheduleKind",
    "SchedulerPort",
    "SystemClock",
]
