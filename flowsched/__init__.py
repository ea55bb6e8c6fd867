"""flowsched: action timeouts, retries and processing-time deadlines for flow engines.

Everything a user's code needs is importable from here. The public subpackages are
:mod:`flowsched.mongo` (the MongoDB classes, also exported here), :mod:`flowsched.observe`
and :mod:`flowsched.metrics_prometheus` (metrics), and :mod:`flowsched.config` (the
configuration's building blocks); every module whose docstring starts with "Internal:" may
change without notice.
"""

from contextlib import suppress
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

from flowsched.backoff import BackoffType, RetryPolicy
from flowsched.clock import Clock, ManualClock, SystemClock
from flowsched.config import ActionPolicy, ProcessingTimePolicy, SchedulingConfig
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
    SchedulerUnavailable,
    TimerAheadOfInstanceError,
    UnknownFlowError,
)
from flowsched.flow import (
    ANY_STATE,
    ActionAdapter,
    ActionRequest,
    ActionTimeoutEvent,
    Flow,
    FlowDomain,
    FlowInstance,
    FlowStore,
    Happened,
    InMemoryFlowStore,
    ProcessingTimeElapsedEvent,
    TimelineEntry,
)
from flowsched.memory import InMemoryScheduler
from flowsched.observe import MetricsObserver, Observers
from flowsched.port import Handler, SchedulerPort
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
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


def _present_as_public(namespace: dict[str, Any]) -> None:
    # Reprs and tracebacks name what a user imports (``flowsched.ScheduleItem``), not the
    # internal module that happens to define it (as APScheduler 4 does). Pickles still
    # resolve: every class rewritten here is importable as ``flowsched.<name>``.
    for name in __all__:
        value = namespace.get(name)
        if getattr(value, "__module__", "").startswith("flowsched."):
            with suppress(AttributeError, TypeError):  # aliases (Handler) keep theirs
                value.__module__ = __name__


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
    "MalformedDocument",
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
    "TimerAheadOfInstanceError",
    "TimelineEntry",
    "UnknownFlowError",
    "parse_duration",
]

_present_as_public(globals())
