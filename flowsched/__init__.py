"""flowsched: action timeouts, retries and processing-time deadlines for flow engines."""

from flowsched.backoff import BackoffType, RetryPolicy
from flowsched.clock import ManualClock, SystemClock
from flowsched.config import ActionPolicy, ProcessingTimePolicy, SchedulingConfig
from flowsched.durations import parse_duration
from flowsched.errors import ConfigError
from flowsched.memory import InMemoryScheduler
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind, SchedulerPort
from flowsched.recurrence import Recurrence

__all__ = [
    "ActionPolicy",
    "BackoffType",
    "ConfigError",
    "InMemoryScheduler",
    "ManualClock",
    "MongoScheduler",
    "ProcessingTimePolicy",
    "Recurrence",
    "RetryPolicy",
    "ScheduleItem",
    "ScheduleKind",
    "SchedulerPort",
    "SchedulingConfig",
    "SystemClock",
    "parse_duration",
]
