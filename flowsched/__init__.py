"""flowsched: action timeouts, retries and processing-time deadlines for flow engines.

Everything a user's code needs is importable from here. The public subpackages are
:mod:`flowsched.mongo` (the MongoDB classes, also exported here), :mod:`flowsched.observe`
and :mod:`flowsched.metrics_prometheus` (metrics), and :mod:`flowsched.config` (the
configuration's building blocks); every module whose docstring starts with "Internal:" may
change without notice.
"""

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from flowsched.async_port import AsyncSchedulerPort
from flowsched.calendar import Calendar
from flowsched.clock import Clock, ManualClock, SystemClock
from flowsched.delivery import Observer, RedeliveryPolicy
from flowsched.durations import parse_duration
from flowsched.errors import (
    ConcurrentUpdateError,
    ConfigError,
    ConfigProblem,
    FlowAlreadyExistsError,
    FlowConfigError,
    FlowDefinitionError,
    FlowschedError,
    MalformedDocument,
    OutcomeUnknown,
    SchedulerUnavailable,
    TimerAheadOfInstanceError,
    Undeliverable,
    UnknownFlowError,
)
from flowsched.handler_limits import HandlerTimedOut
from flowsched.history import HistoryPolicy
from flowsched.memory import InMemoryScheduler
from flowsched.observe import MetricsObserver, Observers
from flowsched.port import Handler, SchedulerPort
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.steering import Attempt, TimerInfo, TimerPage

if TYPE_CHECKING:
    from flowsched.backoff import BackoffType, RetryPolicy
    from flowsched.config import ActionPolicy, ProcessingTimePolicy, SchedulingConfig
    from flowsched.flow import (
        ANY_STATE,
        ActionAdapter,
        ActionRequest,
        ActionTimeoutEvent,
        AsyncFlowDomain,
        AsyncFlowStore,
        Flow,
        FlowDomain,
        FlowInstance,
        FlowStore,
        Happened,
        InMemoryFlowStore,
        ProcessingTimeElapsedEvent,
        TimelineEntry,
    )
    from flowsched.memory.async_scheduler import AsyncInMemoryScheduler
    from flowsched.mongo import AsyncMongoFlowStore, MongoFlowStore, MongoScheduler
    from flowsched.mongo.async_scheduler import AsyncMongoScheduler
    from flowsched.postgres import AsyncPostgresScheduler, PostgresScheduler

__version__ = "0.1.0"
"""The release (the one place it is written: pyproject.toml reads it from here)."""

# Loaded when first asked for (PEP 562), so that ``import flowsched`` and a process that only
# uses the in-memory scheduler do not carry them: the configuration and the flow domain bring
# pyhocon (with pyparsing) and pydantic, 0.1-0.2 s of imports; the MongoDB classes bring the
# driver (pymongo and bson, ~130 modules, tens of thousands of objects the garbage collector
# walks). Each name maps to the module that defines it.
_LAZY = {
    "AsyncInMemoryScheduler": "flowsched.memory.async_scheduler",
    "AsyncMongoScheduler": "flowsched.mongo.async_scheduler",
    "BackoffType": "flowsched.backoff",
    "RetryPolicy": "flowsched.backoff",
    "ActionPolicy": "flowsched.config",
    "ProcessingTimePolicy": "flowsched.config",
    "SchedulingConfig": "flowsched.config",
    **dict.fromkeys(
        (
            "ANY_STATE",
            "ActionAdapter",
            "ActionRequest",
            "ActionTimeoutEvent",
            "AsyncFlowDomain",
            "AsyncFlowStore",
            "Flow",
            "FlowDomain",
            "FlowInstance",
            "FlowStore",
            "Happened",
            "InMemoryFlowStore",
            "ProcessingTimeElapsedEvent",
            "TimelineEntry",
        ),
        "flowsched.flow",
    ),
    "AsyncMongoFlowStore": "flowsched.mongo",
    "MongoFlowStore": "flowsched.mongo",
    "MongoScheduler": "flowsched.mongo",
    # psycopg and its pool load only when these are asked for.
    "AsyncPostgresScheduler": "flowsched.postgres",
    "PostgresScheduler": "flowsched.postgres",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowsched' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    _present(name, value)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _present(name: str, value: object) -> None:
    # Reprs and tracebacks name what a user imports (``flowsched.ScheduleItem``), not the
    # internal module that happens to define it (as APScheduler 4 does). Pickles still
    # resolve: every class rewritten here is importable as ``flowsched.<name>``. Names loaded
    # lazily (``__getattr__``) are presented when they are first asked for.
    if name in __all__ and getattr(value, "__module__", "").startswith("flowsched."):
        with suppress(AttributeError, TypeError):  # aliases (Handler) keep theirs
            value.__module__ = __name__


__all__ = [
    "ANY_STATE",
    "ActionAdapter",
    "ActionPolicy",
    "ActionRequest",
    "ActionTimeoutEvent",
    "AsyncFlowDomain",
    "AsyncFlowStore",
    "AsyncInMemoryScheduler",
    "AsyncMongoFlowStore",
    "AsyncMongoScheduler",
    "AsyncPostgresScheduler",
    "AsyncSchedulerPort",
    "Attempt",
    "BackoffType",
    "Calendar",
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
    "HandlerTimedOut",
    "Happened",
    "HistoryPolicy",
    "InMemoryFlowStore",
    "InMemoryScheduler",
    "MalformedDocument",
    "ManualClock",
    "MetricsObserver",
    "MongoFlowStore",
    "MongoScheduler",
    "Observer",
    "Observers",
    "OutcomeUnknown",
    "PostgresScheduler",
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
    "TimerAheadOfInstanceError",
    "TimerInfo",
    "TimerPage",
    "TimelineEntry",
    "Undeliverable",
    "UnknownFlowError",
    "parse_duration",
]

for _name, _value in list(globals().items()):
    _present(_name, _value)
