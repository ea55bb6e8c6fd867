"""flowsched: action timeouts, retries and processing-time deadlines for flow engines."""

from flowsched.clock import ManualClock, SystemClock
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind, SchedulerPort

__all__ = [
    "ManualClock",
    "MongoScheduler",
    "ScheduleItem",
    "ScheduleKind",
    "SchedulerPort",
    "SystemClock",
]
