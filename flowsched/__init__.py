"""flowsched: action timeouts, retries and processing-time deadlines for flow engines.

Everything a user's code needs is importable from here. The public subpackages are
:mod:`flowsched.mongo` (the MongoDB classes, also exported here), :mod:`flowsched.observe`
and :mod:`flowsched.metrics_prometheus` (metrics), and :mod:`flowsched.config` (the
configuration's building blocks); every module whose docstring starts with "Internal:" may
change without notice.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

from flowsched.backoff import BackoffType, RetryPolicy
from flowsched.clock import Clock, ManualClock, SystemClock
from flowsched.config import ActionPolicy, ProcessingTimePolicy, SchedulingConfig
from flowsched.delivery import Observer, RedeliveryPolicy
from flowsched.durations import parse_duration
from flowsched.errors import ConfigError, ConfigProblem, FlowschedError, Undeliverable
from flowsched.flow import (
    ANY_STATE,
    ActionAdapter,
    ActionRequest,
    ActionTimeoutEvent,
    ConcurrentUpdateError,
    Flow,
    FlowAlreadyExistsError,
    FlowConfigError,
    FlowDefinitionError,
    FlowDomain,
    FlowInstance,
    FlowStore,
    Happened,
    InMemoryFlowStore,
    ProcessingTimeElapsedEvent,
    TimelineEntry,
    UnknownFlowError,
)
from flowsched.memory import InMemoryScheduler
from flowsched.observe import MetricsObserver, Observers
from flowsched.port import (
    DeadLetter,
    Handler,
    ScheduleItem,
    ScheduleKind,
    SchedulerPort,
    SchedulerUnavailable,
)
from flowsched.recurrence import Recurrence

if TYPE_CHECKING:
    from flowsched.mongo import MongoFlowStore, MongoScheduler

_MONGO_NAMES = frozenset({"MongoFlowStore", "MongoScheduler"})


def __getattr__(name: str) -> Any:
    # The MongoDB classes load the driver (pymongo and bson, ~130 modules, 0.1 s, tens of
    # thousands of objects the garbage collector walks): only when first asked for, so that a
    # process using the in-memory adapter does not carry it.
    if name in _MONGO_NAMES:
        from flowsched import mongo

        value = getattr(mongo, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flowsched' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _MONGO_NAMES)


try:
    __version__ = _version("flowsched")
except PackageNotFoundError:  # pragma: no cover - running from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "ANY_STATE",
    "ActionAdapter",
    "ActionPolicy",
    "ActionRequest",
    "ActionTimeoutEvent",
    "BackoffType",
    "Clock",
    "ConcurrentUpdateError",
    "ConfigError",
    "ConfigProblem",
    "DeadLetter",
    "Flow",
    "FlowAlreadyExistsError",
    "FlowConfigError",
    "FlowDefinitionError",
    "FlowDomain",
    "FlowInstance",
    "FlowStore",
    "FlowschedError",
    "Handler",
    "Happened",
    "InMemoryFlowStore",
    "InMemoryScheduler",
    "ManualClock",
    "MetricsObserver",
    "MongoFlowStore",
    "MongoScheduler",
    "Observer",
    "Observers",
    "ProcessingTimeElapsedEvent",
    "ProcessingTimePolicy",
    "Recurrence",
    "RedeliveryPolicy",
    "RetryPolicy",
    "ScheduleItem",
    "ScheduleKind",
    "SchedulerPort",
    "SchedulerUnavailable",
    "SchedulingConfig",
    "SystemClock",
    "TimelineEntry",
    "Undeliverable",
    "UnknownFlowError",
    "parse_duration",
]
