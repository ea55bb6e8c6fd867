"""flowsched: action timeouts, retries and processing-time deadlines for flow engines."""

from flowsched.backoff import BackoffType, RetryPolicy
from flowsched.clock import ManualClock, SystemClock
from flowsched.config import ActionPolicy, ProcessingTimePolicy, SchedulingConfig
from flowsched.durations import parse_duration
from flowsched.errors import ConfigError, FlowschedError
from flowsched.flow import (
    ANY_STATE,
    ActionRequest,
    ActionTimeoutEvent,
    Flow,
    FlowDomain,
    ProcessingTimeElapsedEvent,
)
from flowsched.memory import InMemoryScheduler
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind, SchedulerPort
from flowsched.recurrence import Recurrence

__all__ = [
    "ANY_STATE",
    "ActionPolicy",
    "ActionRequest",
    "ActionTimeoutEvent",
    "BackoffType",
    "ConfigError",
    "Flow",
    "FlowDomain",
    "FlowschedError",
    "InMemoryScheduler",
    "ManualClock",
    "MongoScheduler",
    "ProcessingTimeElapsedEvent",
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
