"""The public surface: what ``import flowsched`` offers, its version, and ``--version``."""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import flowsched
import flowsched.mongo
from flowsched.cli import build_app

# Pinned on purpose: adding or removing a public name is a decision, made here.
PUBLIC = {
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
    "TimerInfo",
    "TimerPage",
    "Attempt",
    "HandlerTimedOut",
    "HistoryPolicy",
    "OutcomeUnknown",
    "PostgresScheduler",
    "TimelineEntry",
    "Undeliverable",
    "UnknownFlowError",
    "parse_duration",
}

# Modules a user may import by name; every other module says "Internal:" first.
PUBLIC_MODULES = {
    "flowsched",
    "flowsched.config",
    "flowsched.console",
    "flowsched.flow",
    "flowsched.integrations",
    "flowsched.integrations.statemachine",
    "flowsched.integrations.transitions",
    "flowsched.metrics_prometheus",
    "flowsched.mongo",
    "flowsched.observe",
    "flowsched.postgres",
    "flowsched.store",
}


def test_all_is_pinned() -> None:
    assert set(flowsched.__all__) == PUBLIC
    assert len(flowsched.__all__) == len(PUBLIC), "a name is listed twice"


def test_every_public_name_is_importable() -> None:
    missing = [name for name in flowsched.__all__ if not hasattr(flowsched, name)]
    assert missing == []


def test_the_mongo_classes_are_the_public_subpackage_ones() -> None:
    assert flowsched.MongoScheduler is flowsched.mongo.MongoScheduler
    assert flowsched.MongoFlowStore is flowsched.mongo.MongoFlowStore
    assert flowsched.AsyncMongoFlowStore is flowsched.mongo.AsyncMongoFlowStore
    assert set(flowsched.mongo.__all__) == {
        "AsyncMongoFlowStore",
        "AsyncMongoTimerStore",
        "MongoFlowStore",
        "MongoScheduler",
        "MongoTimerStore",
    }


def test_importing_flowsched_does_not_load_the_mongodb_driver() -> None:
    # In a fresh interpreter: the in-memory adapter's users do not carry pymongo; the MongoDB
    # classes load it when first asked for.
    code = (
        "import sys, flowsched\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pymongo', 'bson')))\n"
        "from flowsched import MongoScheduler\n"
        "print(MongoScheduler.__module__, MongoScheduler.__qualname__, 'pymongo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "flowsched MongoScheduler True"]


def test_importing_flowsched_does_not_load_psycopg() -> None:
    # The PostgreSQL classes load psycopg and its pool when first asked for.
    code = (
        "import sys, flowsched\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('psycopg')))\n"
        "from flowsched import PostgresScheduler, AsyncPostgresScheduler\n"
        "import flowsched.postgres as pg\n"
        "print(PostgresScheduler is pg.PostgresScheduler, 'psycopg' in sys.modules)\n"
        "print(AsyncPostgresScheduler is pg.AsyncPostgresScheduler)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "True True", "True"]


def test_every_module_says_whether_it_is_internal() -> None:
    """A module outside PUBLIC_MODULES (and not flowsched.testing) starts with 'Internal:'."""
    root = Path(flowsched.__file__).parent
    unmarked = []
    for info in pkgutil.walk_packages([str(root)], prefix="flowsched."):
        name = info.name
        if name in PUBLIC_MODULES or name.startswith("flowsched.testing"):
            continue
        module = importlib.import_module(name)
        if not (module.__doc__ or "").startswith("Internal: "):
            unmarked.append(name)
    assert unmarked == []


def test_version_is_the_installed_distributions() -> None:
    assert flowsched.__version__ == importlib.metadata.version("flowsched")


def test_the_command_prints_the_version() -> None:
    result = CliRunner().invoke(build_app(), ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"flowsched {flowsched.__version__}\n"


def test_the_installed_script_prints_the_version() -> None:
    script = Path(sys.executable).parent / "flowsched"
    result = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"flowsched {flowsched.__version__}"
