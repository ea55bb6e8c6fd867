"""Internal: which MongoDB collection a ``flowsched timers`` verb works on, and how to reach it.

Every ``flowsched timers`` verb takes the same connection options (:data:`UriOption` ...).
The URI's password is never printed: :func:`redact` masks it in everything shown (headers,
errors), and :meth:`MongoTarget.scrub` removes it from driver messages too. Driver errors
become one line on stderr and exit code 2 (:func:`reporting`).

The driver is imported only when a verb connects, so that ``flowsched explain`` and friends
work without the ``mongo`` extra.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import unquote

import typer

from flowsched.cli._output import fail
from flowsched.config.scheduler_settings import LONGEST_OP_TIMEOUT
from flowsched.durations import parse_duration
from flowsched.errors import ConfigError, SchedulerUnavailable

__all__ = [
    "DEFAULT_URI",
    "CollectionOption",
    "Connect",
    "DbOption",
    "MongoTarget",
    "TimeoutOption",
    "UriOption",
    "connect_pymongo",
    "redact",
    "reporting",
]

DEFAULT_URI = "mongodb://localhost:27017"
URI_ENV = "FLOWSCHED_MONGO_URI"

UriOption = Annotated[
    str | None,
    typer.Option(
        "--uri",
        metavar="URI",
        envvar=URI_ENV,
        show_default=False,  # the environment's URI may hold a password: never echo it
        help=f"MongoDB connection string [default: ${URI_ENV}, else {DEFAULT_URI}].",
    ),
]
DbOption = Annotated[str, typer.Option("--db", metavar="NAME", help="Database name.")]
CollectionOption = Annotated[
    str,
    typer.Option(
        "--collection",
        metavar="NAME",
        help="The scheduler's collection (dead letters are in <collection>_dead).",
    ),
]
TimeoutOption = Annotated[
    str,
    typer.Option(
        "--timeout",
        metavar="DURATION",
        help="How long to wait for the server (a duration such as 5s; a bare number is ms).",
    ),
]


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

    @classmethod
    def of(cls, uri: str | None, db: str, collection: str, timeout: str) -> MongoTarget:
        """From the command-line options; a bad ``--timeout`` exits 2."""
        try:
            wait = parse_duration(timeout)
        except ConfigError as exc:
            fail(f"--timeout {timeout!r}: {exc.problems[0].message}")
        if wait <= timedelta(0):
            fail(f"--timeout {timeout!r}: must be more than 0 (e.g. 5s)")
        if wait > LONGEST_OP_TIMEOUT:  # the driver takes less than a billion milliseconds
            fail(f"--timeout {timeout!r}: must be at most 1d")
        return cls(uri or DEFAULT_URI, db, collection, wait)

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
