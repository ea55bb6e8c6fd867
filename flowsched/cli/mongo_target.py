"""Internal: which MongoDB collection a ``flowsched timers`` verb works on, and how to reach it.

One set of connection options serves every verb (:class:`Connection`): given to the
``timers`` group (``flowsched timers --config application.conf list``) or after the verb
(``flowsched timers list --db ipf``; see :func:`hoist`). They are read, from the strongest:
the option, its environment variable (``FLOWSCHED_MONGO_URI``; ``FLOWSCHED_CONFIG`` names the
file), the file's ``ipf-scheduler.mongodb`` block (``uri``, ``database-name``, ``collection``,
read as :meth:`MongoScheduler.from_config <flowsched.MongoScheduler.from_config>` reads
them), then the defaults (``mongodb://localhost:27017``, the database the URI names, else
``flowsched``; collection ``timers``). Options are checked by the same rules as their keys
(:meth:`~flowsched.config.SchedulerSettings.with_values`).

The URI's password is never printed: :func:`redact` masks it in everything shown (headers,
errors), and :meth:`MongoTarget.scrub` removes it from driver messages too. Driver errors
become one line on stderr and exit code 2 (:func:`reporting`).

The driver is imported only when a verb connects, and the configuration reader only when a
file is given, so that ``flowsched explain`` and friends work without the ``mongo`` extra.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import unquote, urlsplit

import typer
from typer.core import TyperGroup

from flowsched.cli._output import fail
from flowsched.errors import ConfigError, SchedulerUnavailable

if TYPE_CHECKING:
    from flowsched.config.scheduler_settings import SchedulerSettings

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_DB",
    "DEFAULT_TIMEOUT",
    "DEFAULT_URI",
    "CollectionOption",
    "ConfigOption",
    "Connect",
    "Connection",
    "ConnectionGroup",
    "DbOption",
    "MongoTarget",
    "TimeoutOption",
    "UriOption",
    "connect_pymongo",
    "hoist",
    "redact",
    "reporting",
]

DEFAULT_URI = "mongodb://localhost:27017"
DEFAULT_DB = "flowsched"
DEFAULT_TIMEOUT = "5s"
URI_ENV = "FLOWSCHED_MONGO_URI"
CONFIG_ENV = "FLOWSCHED_CONFIG"

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        envvar=CONFIG_ENV,
        show_default=False,
        help="An application.conf: its ipf-scheduler.mongodb uri, database-name and "
        f"collection are the defaults of the options below [default: ${CONFIG_ENV}].",
    ),
]
UriOption = Annotated[
    str | None,
    typer.Option(
        "--uri",
        metavar="URI",
        envvar=URI_ENV,
        show_default=False,  # the environment's URI may hold a password: never echo it
        help=f"MongoDB connection string [default: ${URI_ENV}, else the config's uri, "
        f"else {DEFAULT_URI}].",
    ),
]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        "--database",
        metavar="NAME",
        show_default=False,
        help="Database name [default: the config's database-name, else the URI's database, "
        f"else {DEFAULT_DB}].",
    ),
]
CollectionOption = Annotated[
    str | None,
    typer.Option(
        "--collection",
        metavar="NAME",
        show_default=False,
        help="The scheduler's collection (dead letters are in <collection>_dead) "
        "[default: the config's collection, else timers].",
    ),
]
TimeoutOption = Annotated[
    str | None,
    typer.Option(
        "--timeout",
        metavar="DURATION",
        show_default=False,
        help="How long to wait for the server (a duration such as 5s; a bare number is ms) "
        f"[default: {DEFAULT_TIMEOUT}].",
    ),
]

_CONNECTION_OPTIONS = frozenset(
    {"--config", "--uri", "--db", "--database", "--collection", "--timeout"}
)
"""Every connection option takes a value."""
_OPTION_OF_KEY = {
    "mongodb.uri": "--uri",
    "mongodb.database-name": "--db",
    "mongodb.collection": "--collection",
    "flowsched.op-timeout": "--timeout",
}


def hoist(args: list[str]) -> list[str]:
    """``args`` of a group with the connection options given after the verb moved before it.

    ``["list", "--kind", "TIMER", "--db", "ipf"]`` becomes ``["--db", "ipf", "list", "--kind",
    "TIMER"]``: click reads a group's options before its verb only, and both places are
    documented. Moved options come after those already in front, so the verb's win. Nothing
    after ``--`` is moved."""
    verb = 0
    while verb < len(args) and args[verb].startswith("-") and args[verb] != "--":
        verb += 2 if args[verb] in _CONNECTION_OPTIONS else 1
    if verb >= len(args):
        return args
    front, rest, moved = list(args[:verb]), [args[verb]], []
    index = verb + 1
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest.extend(args[index:])
            break
        if arg in _CONNECTION_OPTIONS and index + 1 < len(args):
            moved.extend(args[index : index + 2])
            index += 2
            continue
        if arg.partition("=")[0] in _CONNECTION_OPTIONS and "=" in arg:
            moved.append(arg)
        else:
            rest.append(arg)
        index += 1
    return front + moved + rest


class ConnectionGroup(TyperGroup):
    """A group whose connection options may also follow its verb (see :func:`hoist`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Click's parsing, after moving the connection options in front of the verb."""
        return super().parse_args(ctx, hoist(args))


@dataclass(frozen=True, slots=True)
class Connection:
    """The connection options as given (``None``: not given); :meth:`target` resolves them."""

    config: Path | None = None
    uri: str | None = None
    db: str | None = None
    collection: str | None = None
    timeout: str | None = None

    def target(self) -> MongoTarget:
        """Where to connect: options over the file's settings over the defaults.

        An unreadable or invalid file, or a bad option, prints one error and exits 2."""
        from flowsched.config.scheduler_settings import SchedulerSettings

        settings = self._file_settings() if self.config is not None else SchedulerSettings()
        given = {
            "mongodb.uri": self.uri,
            "mongodb.database-name": self.db,
            "mongodb.collection": self.collection,
            "flowsched.op-timeout": self.timeout or DEFAULT_TIMEOUT,
        }
        try:
            settings = settings.with_values(given)
        except ConfigError as exc:
            problem = exc.problems[0]
            name = (problem.key or "").removeprefix("ipf-scheduler.")
            option = _OPTION_OF_KEY[name]
            shown = "" if option == "--uri" else f" {given[name]!r}"  # a URI may hold a password
            fail(f"{option}{shown}: {problem.message}")
        uri = settings.uri or DEFAULT_URI
        if settings.database_name is None and not urlsplit(uri).path.strip("/"):
            db = DEFAULT_DB
        else:
            try:
                db = settings.database()
            except ConfigError as exc:
                fail(exc.problems[0].message)
        return MongoTarget(uri, db, settings.collection, settings.op_timeout)

    def _file_settings(self) -> SchedulerSettings:
        from flowsched.config.hocon import load_hocon
        from flowsched.config.scheduler_settings import read_scheduler_settings

        assert self.config is not None
        try:
            settings, problems = read_scheduler_settings(load_hocon(self.config))
        except OSError as exc:
            fail(f"--config {self.config}: cannot read it: {exc.strerror or exc}")
        except ConfigError as exc:
            problems = list(exc.problems)
        if problems:
            first = problems[0]
            if (first.key or "").endswith("mongodb.uri"):  # its value may hold a password
                first = replace(first, value=None)
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            fail(f"--config {self.config}: {first}{more}; see flowsched check {self.config}")
        return settings


def redact(uri: str) -> str:
    """``uri`` with the password of its user information replaced by ``***``.

    >>> redact("mongodb://app:s3cret@db1,db2/shop?replicaSet=rs0")
    'mongodb://app:***@db1,db2/shop?replicaSet=rs0'

    Where the user information cannot be told apart for sure (an unescaped ``/`` in the
    password, an ``@`` in an option), more is masked rather than less."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        scheme, rest = "", uri
    authority = rest.partition("/")[0]
    # As the driver reads it: the user information ends at the last "@" before the path.
    cut = authority.rfind("@") if "@" in authority else rest.rfind("@")
    if cut < 0:
        return uri
    user, colon, _ = rest[:cut].partition(":")
    if not colon:
        return uri
    return f"{scheme}{sep}{user}:***{rest[cut:]}"


@dataclass(frozen=True, slots=True)
class MongoTarget:
    """A collection to inspect: where, which database and collection, how long to wait."""

    uri: str
    db: str
    collection: str
    timeout: timedelta

    @property
    def shown(self) -> str:
        """The URI as it may be printed (password masked)."""
        return redact(self.uri)

    @property
    def namespace(self) -> str:
        """``<db>.<collection>``."""
        return f"{self.db}.{self.collection}"

    def scrub(self, message: object) -> str:
        """``message`` on one line, without the URI's password (raw or unescaped)."""
        text = " ".join(str(message).split())
        shown, raw = self.shown, self.uri
        if shown != raw:
            start = shown.index(":***") + 1
            secret = raw[start : len(raw) - (len(shown) - start - 3)]
            for form in sorted({secret, unquote(secret)}, key=len, reverse=True):
                if form:
                    text = text.replace(form, "***")
        return text


Connect = Callable[[MongoTarget], AbstractContextManager[Any]]
"""Opens the target's database (a pymongo ``Database``, or a stand-in in tests)."""


@contextmanager
def connect_pymongo(target: MongoTarget) -> Iterator[Any]:
    """A client on ``target`` with short timeouts, closed on exit; yields the database."""
    try:
        import pymongo
    except ImportError:
        fail("flowsched timers needs the MongoDB driver: pip install 'flowsched[mongo]'")
    millis = max(1, int(target.timeout / timedelta(milliseconds=1)))
    try:
        client: Any = pymongo.MongoClient(
            target.uri,
            serverSelectionTimeoutMS=millis,
            connectTimeoutMS=millis,
            socketTimeoutMS=millis,
            tz_aware=True,
            appname="flowsched-cli",
        )
    except (pymongo.errors.PyMongoError, ValueError, TypeError) as exc:
        fail(f"invalid MongoDB URI {target.shown}: {target.scrub(exc)}")
    try:
        yield client[target.db]
    finally:
        client.close()


@contextmanager
def reporting(target: MongoTarget) -> Iterator[None]:
    """Turn driver errors raised inside into one ``flowsched: error:`` line and exit 2."""
    try:
        yield
    except typer.Exit:
        raise
    except SchedulerUnavailable as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        fail(f"cannot reach MongoDB at {target.shown}: {_reason(target, cause)}")
    except ConfigError as exc:
        fail(str(exc))
    except Exception as exc:
        if not _is_driver_error(exc):
            raise
        if _is_connection_error(exc):
            fail(f"cannot reach MongoDB at {target.shown}: {_reason(target, exc)}")
        fail(f"MongoDB at {target.shown} refused the request: {_reason(target, exc)}")


def _is_driver_error(exc: BaseException) -> bool:
    try:
        from pymongo.errors import PyMongoError
    except ImportError:  # no driver, so no driver error either
        return False
    return isinstance(exc, PyMongoError)


def _is_connection_error(exc: BaseException) -> bool:
    from pymongo.errors import ConnectionFailure, ServerSelectionTimeoutError

    return isinstance(exc, ConnectionFailure | ServerSelectionTimeoutError)


def _reason(target: MongoTarget, exc: BaseException) -> str:
    details = getattr(exc, "details", None)
    if isinstance(details, dict) and isinstance(details.get("errmsg"), str):
        code = details.get("codeName")
        text = f"{details['errmsg']} ({code})" if code else details["errmsg"]
    else:
        # The driver appends its timeouts and the whole topology: keep the first reason.
        text = re.split(r" \(configured timeouts|, Timeout: ", str(exc))[0]
    return target.scrub(text) or type(exc).__name__
