"""Internal: ``flowsched.console.app(...)``: the console as an ASGI application (Starlette).

Serve it with any ASGI server (``flowsched console`` uses uvicorn), or mount it in your own
service: ``Mount("/scheduler", app=console.app(database))``. Links and cookies follow the
mount path (``root_path``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from flowsched.cli.mongo_target import MongoTarget, redact
from flowsched.cli.timers_render import iso
from flowsched.clock import Clock, SystemClock
from flowsched.console.driver import LoopClient, LoopDatabase
from flowsched.console.identity import Proxy, User, exposed, read_users_file
from flowsched.console.memory_source import MemorySource
from flowsched.console.pages import Pages
from flowsched.console.routing import HEADERS, LOOPBACK_HOSTS, Shell, build
from flowsched.console.security import DEFAULT_TTL, Guard, read_token_file
from flowsched.console.source import MongoSource
from flowsched.console.store_source import StoreSource, is_store
from flowsched.console.views import human

__all__ = ["HEADERS", "LOOPBACK_HOSTS", "app"]

log = logging.getLogger("flowsched.console")


def app(
    target: Any = None,
    *,
    uri: str | None = None,
    scheduler: Any = None,
    database: Any = "flowsched",
    collection: str = "timers",
    table: str = "flowsched_timers",
    token: str | None = None,
    token_file: str | Path | None = None,
    clock: Clock | None = None,
    query_budget_ms: int = 5000,
    users_file: str | Path | None = None,
    users: dict[str, User] | None = None,
    trusted_proxies: Sequence[str] = (),
    user_header: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    hide_payloads: bool = False,
    session_ttl: timedelta = DEFAULT_TTL,
) -> Shell:
    """The console over ``target``, as an ASGI application.

    ``target`` (or ``uri=``, ``scheduler=``) is one of:

    * a MongoDB URI: read with ``pymongo.AsyncMongoClient`` (``database``, ``collection``
      name the scheduler's collection, as ``MongoScheduler`` was given);
    * a ``postgresql://`` URI: ``table`` (as ``PostgresScheduler`` was given) read and steered
      through a :class:`~flowsched.postgres.PostgresTimerStore` (the table must exist);
    * a timer store (:class:`~flowsched.store.TimerStore`, or its async twin): read and
      steered through its calls (see :mod:`flowsched.console.store_source`);
    * a database of the async or the sync driver (or mongomock), also as ``database=``:
      ``collection`` in it;
    * a running scheduler (``InMemoryScheduler``, or an async one whose ``get``,
      ``dead_letters``, ``requeue`` and ``cancel`` are coroutines): the timer, dead letter
      and audit pages work, the others say they need MongoDB.

    Identities: ``users_file`` (``name:role:hash`` lines; or ``users``), ``token`` (or
    ``token_file``: one operator, ``token``), or a reverse proxy's ``user_header`` believed
    from ``trusted_proxies`` only. With any of them every page needs a sign-in (a session
    lasting ``session_ttl``); with none the console is open and read-only. Operators may
    cancel, run now, requeue and work in bulk; everything done or refused is recorded in
    ``<collection>_audit`` (on PostgreSQL ``<table>_audit``; in memory over a scheduler or a
    store object). ``allowed_hosts``: the ``Host``
    names served (default: any; ``flowsched console`` passes the loopback names when it
    binds loopback). ``hide_payloads``: payloads shown as sizes. Every read is stopped
    after ``query_budget_ms``. A users or token file others can read is named in a warning.

    >>> from flowsched import InMemoryScheduler
    >>> console = app(InMemoryScheduler())
    """
    if token is None and token_file is not None:
        _warn_if_exposed(token_file, "token")
        token = read_token_file(token_file)
    if users is None and users_file is not None:
        _warn_if_exposed(users_file, "users")
        users = read_users_file(users_file)
    clock = clock or SystemClock()
    if not isinstance(database, str):  # app(database=<a driver's database>)
        target, database = database, getattr(database, "name", "flowsched")
    for given in (uri, scheduler):
        target = given if target is None else target
    if target is None:
        raise TypeError("app(...): give a MongoDB URI, a database, or a scheduler")
    client: LoopClient | None = None
    shown = ""
    source: MongoSource | MemorySource | StoreSource
    if isinstance(target, str) and target.lower().startswith(("postgresql://", "postgres://")):
        from flowsched.console.postgres_audit import PostgresAudit

        store = _postgres_store(target, table, query_budget_ms)
        source = StoreSource(store, clock, table, PostgresAudit(store))
        shown = f"{redact(target)} table {table}"
    elif isinstance(target, str):
        client, mongo = _client(target, query_budget_ms)
        shown = f"{redact(target)} {database}.{collection}"
        source = MongoSource(
            LoopDatabase(client, database), collection, clock, mongo.scrub, query_budget_ms
        )
    elif hasattr(target, "list_collection_names") or hasattr(target, "get_collection"):
        source = MongoSource(target, collection, clock, str, query_budget_ms)
        shown = f"{getattr(target, 'name', database)}.{collection}"
    elif is_store(target):
        source = StoreSource(target, clock)
        shown = f"a {type(target).__name__} ({source.name})"
    elif hasattr(target, "get") and hasattr(target, "dead_letters"):
        source = MemorySource(target, clock)
        shown = f"a running {type(target).__name__}"
    else:
        raise TypeError(
            f"app(...): {type(target).__name__} is neither a MongoDB URI, a database, "
            "nor a scheduler (get, dead_letters, requeue, cancel)"
        )
    env = Environment(
        loader=PackageLoader("flowsched.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["iso"] = iso
    env.filters["human"] = human
    guard = Guard(token, users=users, proxy=Proxy(trusted_proxies, user_header), clock=clock,
                  session_ttl=session_ttl)  # fmt: skip
    pages = Pages(source, guard, env, clock, shown, hide_payloads)
    return build(pages, client, allowed_hosts)


def _warn_if_exposed(path: str | Path, what: str) -> None:
    if Path(path).exists() and exposed(path):
        log.warning(
            "console: the %s file %s can be read by other users: chmod 600 %s", what, path, path
        )


def _postgres_store(url: str, table: str, budget_ms: int) -> Any:
    """A store on ``table`` at ``url`` (no table is made: a name mistyped is an error)."""
    try:
        from flowsched.postgres import PostgresTimerStore
    except ImportError:
        raise ImportError(
            "the console on PostgreSQL needs psycopg: pip install 'flowsched[postgres]'"
        ) from None
    from flowsched.postgres.queries import check_table_name

    check_table_name(table)
    store = PostgresTimerStore(url, table=table, migrate=False, op_timeout=budget_ms / 1000)
    try:
        with store.pool.connection(timeout=budget_ms / 1000) as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f'"{table}_schema"',)).fetchone()
    except Exception:
        store.close()
        raise
    if found is None or found[0] is None:
        store.close()
        raise ValueError(
            f"no flowsched timers table {table} at {redact(url)} (flowsched db migrate makes one)"
        )
    return store


def _client(uri: str, budget_ms: int) -> tuple[LoopClient, MongoTarget]:
    from datetime import timedelta

    try:
        import pymongo
    except ImportError:
        raise ImportError(
            "the console needs the driver: pip install 'flowsched[console]'"
        ) from None
    target = MongoTarget(uri, "", "", timedelta(milliseconds=budget_ms))

    def connect() -> Any:
        return pymongo.AsyncMongoClient(
            uri,
            tz_aware=True,
            serverSelectionTimeoutMS=max(budget_ms, 1000),
            connectTimeoutMS=max(budget_ms, 1000),
            appname="flowsched-console",
        )

    try:
        client = LoopClient(connect)
    except (pymongo.errors.PyMongoError, ValueError, TypeError) as exc:
        raise ValueError(f"invalid MongoDB URI {target.shown}: {target.scrub(exc)}") from None
    return client, target
