"""Fixtures for ``flowsched timers``: a namespace to seed, and a way to run the verbs on it.

``timers(*args)`` runs a verb in-process (``CliRunner``) and returns ``(exit code, stdout,
stderr)``. On mongomock the app gets a ManualClock at ``NOW`` and a connector that opens the
mongomock database; on the wire server it is the real ``flowsched`` app given ``--uri`` and
``--db`` (system clock: seed wire data hours away from now, never near it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("pymongo")
mongomock = pytest.importorskip("mongomock")

from timers_kit import NOW, Namespace, Result, run  # noqa: E402

from flowsched.cli import build_app  # noqa: E402
from flowsched.cli.mongo_target import MongoTarget  # noqa: E402
from flowsched.cli.timers_commands import TimersCli  # noqa: E402
from flowsched.clock import ManualClock  # noqa: E402


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def mock_client() -> Any:
    return mongomock.MongoClient(tz_aware=True)


@pytest.fixture
def namespace(mock_client: Any, clock: ManualClock) -> Namespace:
    """``flowsched.timers`` on mongomock (the verbs' defaults for --db and --collection)."""
    return Namespace(mock_client["flowsched"]["timers"], clock)


@pytest.fixture
def timers(mock_client: Any, clock: ManualClock) -> Callable[..., Result]:
    """Run ``flowsched timers <args>`` on mongomock, with ``clock``'s now."""

    @contextmanager
    def connect(target: MongoTarget) -> Iterator[Any]:
        yield mock_client[target.db]

    app = TimersCli(connect=connect, clock=clock).app()
    return lambda *args: run(app, list(args))


@pytest.fixture
def wire_namespace(mongo_db: Any) -> Namespace:
    """``<fresh db>.timers`` on the wire server, with the system clock."""
    from flowsched.clock import SystemClock

    return Namespace(mongo_db["timers"], SystemClock())


@pytest.fixture
def wire_timers(mongo_uri: str, mongo_db: Any) -> Callable[..., Result]:
    """Run ``flowsched timers <verb> <args> --uri <wire> --db <fresh db>``."""
    app = build_app()
    options = ["--uri", mongo_uri, "--db", mongo_db.name, "--timeout", "10s"]
    return lambda verb, *args: run(app, ["timers", verb, *options, *args])  # args win
