"""The pytest fixtures of the test kit, loaded by pytest through flowsched's ``pytest11``
entry point (no conftest needed): ``manual_clock``, ``memory_scheduler``,
``mongo_scheduler``, ``postgres_scheduler`` and ``scheduler``; for ``async def`` tests
(pytest-asyncio, installed with ``flowsched[testing]``) ``async_memory_scheduler``,
``async_mongo_scheduler``, ``async_postgres_scheduler`` and ``async_scheduler``. The
PostgreSQL ones run on the server at ``FLOWSCHED_POSTGRES_URL`` (a fresh table per test,
dropped after) and skip, saying so, when it is not set. Each scheduler fixture takes settings
from a ``flowsched`` marker: ``@pytest.mark.flowsched(max_attempts=3)`` (see
:mod:`flowsched.testing._settings`). See :mod:`flowsched.testing`."""

from __future__ import annotations

import functools
import inspect
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from flowsched.async_port import AsyncSchedulerPort
from flowsched.clock import ManualClock
from flowsched.memory import AsyncInMemoryScheduler, InMemoryScheduler
from flowsched.port import SchedulerPort
from flowsched.testing._loop_scope import default_loop_scope
from flowsched.testing._settings import MARKER_HELP, marked_settings
from flowsched.testing._trial import CLOCK_START

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - flowsched installed without its testing extra
    pytest_asyncio = None  # type: ignore[assignment]

__all__ = [
    "async_memory_scheduler",
    "async_mongo_scheduler",
    "async_postgres_scheduler",
    "async_scheduler",
    "manual_clock",
    "memory_scheduler",
    "mongo_scheduler",
    "postgres_scheduler",
    "scheduler",
]

MONGO_URI_VARIABLE = "FLOWSCHED_MONGO_URI"
POSTGRES_URL_VARIABLE = "FLOWSCHED_POSTGRES_URL"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Registers the ``flowsched`` marker (no unknown-marker warning under ``--strict``) and,
    before pytest-asyncio reads it, gives ``asyncio_default_fixture_loop_scope`` a value
    when the project sets none (see :func:`~flowsched.testing._loop_scope.default_loop_scope`)."""
    config.addinivalue_line("markers", MARKER_HELP)
    default_loop_scope(config)


@pytest.fixture
def manual_clock() -> ManualClock:
    """A :class:`~flowsched.ManualClock` at 2026-01-01T00:00:00Z: time moves only when the
    test calls ``advance`` (which delivers what falls due, each item at its due time)."""
    return ManualClock(CLOCK_START)


@pytest.fixture
def memory_scheduler(
    request: pytest.FixtureRequest, manual_clock: ManualClock
) -> Iterator[InMemoryScheduler]:
    """A started :class:`~flowsched.InMemoryScheduler` on ``manual_clock``, closed after
    (with the settings of the test's ``@pytest.mark.flowsched(...)``)."""
    settings = marked_settings(request, InMemoryScheduler)
    scheduler = InMemoryScheduler(clock=manual_clock, **settings)
    scheduler.start()
    yield scheduler
    scheduler.close()


@functools.cache
def _unreachable(uri: str) -> str | None:
    """Why the server at ``uri`` does not answer a ping within 10 s (``None``: it does);
    asked once per session."""
    import pymongo

    from flowsched.cli.mongo_target import redact

    client: Any = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    try:
        client.admin.command("ping")
    except pymongo.errors.PyMongoError as exc:
        return (
            f"{MONGO_URI_VARIABLE} is {redact(uri)}, but no MongoDB answers there "
            f"({type(exc).__name__}: {str(exc)[:200]}); start it, or unset "
            f"{MONGO_URI_VARIABLE} to run these tests on mongomock"
        )
    finally:
        client.close()
    return None


def _check_reachable(uri: str) -> None:
    """One clear error at set-up when the server at ``uri`` is down (not a failure inside the
    test and a driver error at tear-down, 10-20 s each)."""
    problem = _unreachable(uri)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="session")
def _flowsched_mongo_client() -> Iterator[Any]:
    """One client per session: to the server at ``FLOWSCHED_MONGO_URI``, else mongomock."""
    uri = os.environ.get(MONGO_URI_VARIABLE)
    if uri:
        pymongo = pytest.importorskip("pymongo", reason="the mongo_scheduler fixture needs pymongo")
        _check_reachable(uri)
        client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    else:
        pytest.importorskip("pymongo", reason="the mongo_scheduler fixture needs pymongo")
        mongomock = pytest.importorskip(
            "mongomock",
            reason=f"mongo_scheduler needs mongomock, or a server at {MONGO_URI_VARIABLE}",
        )
        client = mongomock.MongoClient()
    yield client
    client.close()


@pytest.fixture
def mongo_scheduler(
    request: pytest.FixtureRequest, manual_clock: ManualClock, _flowsched_mongo_client: Any
) -> Iterator[Any]:
    """A started :class:`~flowsched.MongoScheduler` on ``manual_clock`` over the collection
    ``timers`` of a database of its own (dropped after the test), with the settings of the
    test's ``@pytest.mark.flowsched(...)``."""
    from flowsched.mongo import MongoScheduler

    settings = {"node_id": "test", **marked_settings(request, MongoScheduler)}
    name = f"flowsched_test_{uuid.uuid4().hex[:12]}"
    database = _flowsched_mongo_client[name]
    scheduler = MongoScheduler(database["timers"], clock=manual_clock, **settings)
    scheduler.start()
    yield scheduler
    scheduler.close()
    _flowsched_mongo_client.drop_database(name)


def _postgres_url() -> str:
    """The server of the PostgreSQL fixtures, or a skip saying how to give one."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        pytest.skip(f"{POSTGRES_URL_VARIABLE} is not set: no PostgreSQL server to test on")
    pytest.importorskip("psycopg", reason="the PostgreSQL fixtures need flowsched[postgres]")
    return url


def _drop_table(url: str, table: str) -> None:
    import psycopg

    from flowsched.postgres.schema import drop_tables

    with psycopg.connect(url, autocommit=True) as conn:
        drop_tables(conn, table)


@pytest.fixture
def postgres_scheduler(request: pytest.FixtureRequest, manual_clock: ManualClock) -> Iterator[Any]:
    """A started :class:`~flowsched.PostgresScheduler` on ``manual_clock`` over a table of
    its own (dropped after the test), on the server at ``FLOWSCHED_POSTGRES_URL``."""
    url = _postgres_url()
    from flowsched.postgres import PostgresScheduler

    table = f"flowsched_test_{uuid.uuid4().hex[:12]}"
    settings = {"node_id": "test", **marked_settings(request, PostgresScheduler)}
    scheduler = PostgresScheduler(url, table=table, clock=manual_clock, **settings)
    try:
        scheduler.start()
        yield scheduler
    finally:
        scheduler.close()
        _drop_table(url, table)


# The parametrised fixtures include PostgreSQL when a server is given.
ADAPTERS = ["memory", "mongo"] + (["postgres"] if os.environ.get(POSTGRES_URL_VARIABLE) else [])
"""What ``scheduler`` runs over."""


@pytest.fixture(params=ADAPTERS)
def scheduler(request: pytest.FixtureRequest) -> SchedulerPort:
    """Each adapter in turn (the test runs once per adapter): ``memory_scheduler``,
    ``mongo_scheduler``, then ``postgres_scheduler`` when ``FLOWSCHED_POSTGRES_URL`` is
    set."""
    built: SchedulerPort = request.getfixturevalue(f"{request.param}_scheduler")
    return built


# -- the asyncio face ------------------------------------------------------------------------
#
# pytest-asyncio runs the async fixtures (and the tests marked @pytest.mark.asyncio) on one
# event loop per test. Without it the async fixtures skip, saying what to install.

ASYNC_ADAPTERS = ADAPTERS
"""What ``async_scheduler`` runs over."""


def _async_fixture(function: Callable[..., Any]) -> Any:
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(function)

    @pytest.fixture(name=function.__name__)
    def missing() -> None:
        pytest.skip(f"{function.__name__} needs pytest-asyncio: pip install 'flowsched[testing]'")

    missing.__doc__ = function.__doc__
    return missing


@_async_fixture
async def async_memory_scheduler(
    request: pytest.FixtureRequest,
    manual_clock: ManualClock,
) -> AsyncIterator[AsyncInMemoryScheduler]:
    """A started :class:`~flowsched.AsyncInMemoryScheduler` on ``manual_clock``, closed
    after the test: ``await manual_clock.advance_async(delta)`` delivers what falls due.
    Settings: the test's ``@pytest.mark.flowsched(...)``."""
    settings = marked_settings(request, AsyncInMemoryScheduler)
    scheduler = AsyncInMemoryScheduler(clock=manual_clock, **settings)
    await scheduler.start()
    yield scheduler
    await scheduler.aclose()


@_async_fixture
async def async_mongo_scheduler(
    request: pytest.FixtureRequest, manual_clock: ManualClock
) -> AsyncIterator[Any]:
    """A started ``AsyncMongoScheduler`` on ``manual_clock`` over a collection of a
    database of its own (dropped after the test): on the server at ``FLOWSCHED_MONGO_URI``
    (pymongo's ``AsyncMongoClient``), else on mongomock, whose calls the asyncio driver runs
    inline (mongomock has no asyncio client; the procedures run are the same). Settings: the
    test's ``@pytest.mark.flowsched(...)``."""
    pytest.importorskip("pymongo", reason="async_mongo_scheduler needs pymongo")
    from flowsched.mongo.async_scheduler import AsyncMongoScheduler

    settings = {"node_id": "test", **marked_settings(request, AsyncMongoScheduler)}
    uri = os.environ.get(MONGO_URI_VARIABLE)
    name = f"flowsched_test_{uuid.uuid4().hex[:12]}"
    client: Any
    if uri:
        from pymongo import AsyncMongoClient

        _check_reachable(uri)
        client = AsyncMongoClient(uri, serverSelectionTimeoutMS=10_000, tz_aware=True)
    else:
        mongomock = pytest.importorskip(
            "mongomock",
            reason=f"async_mongo_scheduler needs mongomock, or a server at {MONGO_URI_VARIABLE}",
        )
        client = mongomock.MongoClient(tz_aware=True)
    scheduler = AsyncMongoScheduler(client[name]["timers"], clock=manual_clock, **settings)
    await scheduler.start()
    try:
        yield scheduler
    finally:
        await scheduler.aclose()
        for call in (client.drop_database(name), client.close()):
            if inspect.isawaitable(call):
                await call


@_async_fixture
async def async_postgres_scheduler(
    request: pytest.FixtureRequest, manual_clock: ManualClock
) -> AsyncIterator[Any]:
    """A started :class:`~flowsched.AsyncPostgresScheduler` on ``manual_clock`` over a table
    of its own (dropped after the test), on the server at ``FLOWSCHED_POSTGRES_URL``."""
    url = _postgres_url()
    from flowsched.postgres import AsyncPostgresScheduler

    table = f"flowsched_test_{uuid.uuid4().hex[:12]}"
    settings = {"node_id": "test", **marked_settings(request, AsyncPostgresScheduler)}
    scheduler = AsyncPostgresScheduler(url, table=table, clock=manual_clock, **settings)
    try:
        await scheduler.start()
        yield scheduler
    finally:
        await scheduler.aclose()
        _drop_table(url, table)


@pytest.fixture(params=ASYNC_ADAPTERS)
def async_scheduler(request: pytest.FixtureRequest) -> AsyncSchedulerPort:
    """Each asyncio adapter in turn: ``async_memory_scheduler``, ``async_mongo_scheduler``,
    then ``async_postgres_scheduler`` when ``FLOWSCHED_POSTGRES_URL`` is set."""
    built: AsyncSchedulerPort = request.getfixturevalue(f"async_{request.param}_scheduler")
    return built
