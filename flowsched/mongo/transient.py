"""Internal: MongoDB outage handling — which driver errors are transient, bounded retries.

``schedule``/``cancel``/... retry transient errors (lost connection, no primary, server
restarting) until ``op_timeout`` has passed, then raise :class:`SchedulerUnavailable`: the
caller always learns that the call did not take effect, nothing is dropped silently.

The wait is real elapsed time (``time.monotonic`` through the driver's own timeout), not the
scheduler's clock: a network does not answer faster because a test's ManualClock moved.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import pymongo
from bson.errors import BSONError
from pymongo.errors import (
    BulkWriteError,
    ConnectionFailure,
    ExecutionTimeout,
    OperationFailure,
    PyMongoError,
    WriteError,
)

from flowsched.errors import ConfigError, OutcomeUnknown, SchedulerUnavailable

__all__ = [
    "SWEEP_BACKOFF",
    "OutageBackoff",
    "OutageLog",
    "UNWRITABLE",
    "hosts",
    "is_transient",
    "log_sweep_failure",
    "refused_for_good",
    "sweep_backoff",
    "unavailable",
    "within",
    "within_async",
]

log = logging.getLogger("flowsched.mongo")

T = TypeVar("T")

# Server error codes that mean "try again later": interrupted by shutdown/step-down,
# not primary, host unreachable, exceeded time limit...
_REASON = re.compile(r" \(configured timeouts|, Timeout: |, Topology Description: ")
"""Where the driver's own message turns into its timeouts and the whole topology."""
_LONGEST_REASON = 120

_TRANSIENT_CODES = frozenset({6, 7, 50, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436})


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is an outage (worth retrying) rather than a bad request."""
    if isinstance(exc, ConnectionFailure | ExecutionTimeout):
        return True
    if isinstance(exc, PyMongoError) and exc.timeout:
        return True
    if isinstance(exc, OperationFailure):
        return exc.code in _TRANSIENT_CODES or exc.has_error_label("RetryableWriteError")
    return False


SWEEP_BACKOFF = (0.1, 5.0)
"""A sweep loop's waits after a failed turn, both faces: 0.1 s doubling to 5 s (the threaded
node's range, kept: a cluster of nodes polls a recovering server at most every 5 s each)."""


def sweep_backoff() -> OutageBackoff:
    """The backoff of a node's sweep loop (:data:`SWEEP_BACKOFF`), the same on both faces."""
    return OutageBackoff(*SWEEP_BACKOFF)


UNWRITABLE = (BSONError, OverflowError, TypeError, ValueError)
"""Errors of an outcome that cannot be encoded (not the server's doing)."""


def refused_for_good(exc: BaseException) -> bool:
    """Whether a settle failed for a reason no retry of the same writes can mend: the server
    refused a write for good, or an outcome cannot be encoded. Then, on both faces, the
    outcomes are written one by one (:meth:`Claims.settle_each_steps`): never a whole batch
    dropped for one bad outcome."""
    if isinstance(exc, BulkWriteError | WriteError):
        return not is_transient(exc)
    return isinstance(exc, UNWRITABLE)


class OutageBackoff:
    """Exponential waits between retries: ``first``, doubling, at most ``cap`` (seconds)."""

    def __init__(self, first: float = 0.05, cap: float = 2.0) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next(self) -> float:
        """The next wait; each call doubles the following one up to ``cap``."""
        wait = self._next
        self._next = min(self._next * 2, self.cap)
        return wait

    def reset(self) -> None:
        self._next = self.first


def within(
    op_timeout: timedelta,
    what: str,
    operation: Callable[[], T],
    collection: Any = None,
    *,
    write: bool = False,
    again: Callable[[], T] | None = None,
) -> T:
    """Run ``operation``, retrying transient errors for at most ``op_timeout`` in all.

    Raises :class:`SchedulerUnavailable` when the time is up: one short line naming ``what``,
    the hosts of ``collection``'s client and the wait, with the last driver error as its
    ``__cause__``; for a ``write`` of which an attempt may have been applied
    (:func:`flowsched.mongo.outcome.maybe_applied`), :class:`~flowsched.OutcomeUnknown`.
    After such an attempt, ``again`` (if given) is run instead of ``operation``.
    Non-transient driver errors propagate at once.
    """
    from flowsched.mongo.outcome import maybe_applied, unknown_message

    budget = op_timeout.total_seconds()
    deadline = time.monotonic() + budget
    backoff = OutageBackoff()
    sent = False  # an attempt may have been applied
    while True:
        remaining = deadline - time.monotonic()
        try:
            with pymongo.timeout(max(remaining, 0.001)):
                return (again if sent and again is not None else operation)()
        except PyMongoError as exc:
            if not is_transient(exc):
                raise
            sent = sent or (write and maybe_applied(exc))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                message = unavailable(what, budget, exc, collection)
                if sent:
                    raise OutcomeUnknown(unknown_message(message)) from exc
                raise SchedulerUnavailable(message) from exc
            log.debug("%s failed (%s), retrying", what, exc)
            time.sleep(min(backoff.next(), remaining))


async def within_async(
    op_timeout: timedelta,
    what: str,
    attempt: Callable[[bool], Awaitable[T]],
    collection: Any = None,
    *,
    write: bool = False,
) -> T:
    """:func:`within` on the running loop: ``attempt(sent)`` (``sent``: an earlier attempt
    may have been applied), each try bounded by what is left of ``op_timeout``."""
    from flowsched.mongo.outcome import maybe_applied, unknown_message

    budget = op_timeout.total_seconds()
    deadline = time.monotonic() + budget
    backoff = OutageBackoff()
    sent = False
    while True:
        try:
            with pymongo.timeout(max(deadline - time.monotonic(), 0.001)):
                return await attempt(sent)
        except PyMongoError as exc:
            remaining = deadline - time.monotonic()
            if not is_transient(exc):
                raise
            sent = sent or (write and maybe_applied(exc))
            if remaining <= 0:
                message = unavailable(what, budget, exc, collection)
                if sent:
                    raise OutcomeUnknown(unknown_message(message)) from exc
                raise SchedulerUnavailable(message) from exc
            await asyncio.sleep(min(backoff.next(), remaining))


def log_sweep_failure(owner: str, exc: Exception) -> None:
    """Log the first failure of a node's sweep loop as what it is: this node's settings (no
    retry can mend them), an outage (retried), or a bug (retried, with its traceback)."""
    if isinstance(exc, ConfigError):
        log.error("sweeper of %s claims nothing: %s", owner, exc)
    elif is_transient(exc):
        log.warning("sweeper of %s: MongoDB unreachable, retrying: %s", owner, exc)
    else:
        log.exception("sweeper of %s failed, retrying", owner)


def hosts(collection: Any) -> str:
    """The servers ``collection``'s client knows (``db1:27017,db2:27017``), ``"?"`` if none.

    Read from the client's topology description: no network call, nothing that can block."""
    try:
        servers = collection.database.client.topology_description.server_descriptions()
        return ",".join(f"{host}:{port}" for host, port in servers) or "?"
    except Exception:  # a stand-in collection (tests, mongomock) has no topology
        return "?"


def unavailable(what: str, budget: float, exc: BaseException, collection: Any = None) -> str:
    """The one line of a :class:`SchedulerUnavailable`: what did not happen, where, how long,
    and the driver's first reason (its topology dump stays in the ``__cause__``).

    >>> from pymongo.errors import ServerSelectionTimeoutError
    >>> error = ServerSelectionTimeoutError(
    ...     "h:1: [Errno 111] Connection refused (configured timeouts: ...), Timeout: 0.5s, "
    ...     "Topology Description: <TopologyDescription id: ...>")
    >>> unavailable("schedule('t')", 0.5, error)
    "MongoDB at ? unreachable: schedule('t') did not take effect within op_timeout=0.5s (ServerSelectionTimeoutError: h:1: [Errno 111] Connection refused)"
    """  # noqa: E501
    reason = _REASON.split(" ".join(str(exc).split()), maxsplit=1)[0]
    if len(reason) > _LONGEST_REASON:
        reason = reason[: _LONGEST_REASON - 3] + "..."
    where = hosts(collection) if collection is not None else "?"
    detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
    return (
        f"MongoDB at {where} unreachable: {what} did not take effect within "
        f"op_timeout={budget:g}s ({detail})"
    )


class OutageLog:
    """A sweep loop's outage in the log: once when it begins (:func:`log_sweep_failure`),
    once with its length when a turn succeeds again.

    The length runs from the *start* of the first failing turn, not from when it failed: a
    turn blocks for up to ``op_timeout`` before its error arrives, and the last turn that
    succeeded ended at most one poll interval before that start. So the figure is the
    outage's real length to within one poll interval."""

    def __init__(self, owner: str, monotonic: Callable[[], float]) -> None:
        self._owner = owner
        self._monotonic = monotonic
        self._since: float | None = None

    def failed(self, exc: Exception, turn_started: float) -> None:
        """A turn that began at ``turn_started`` (monotonic seconds) raised ``exc``."""
        if self._since is None:
            self._since = turn_started
            log_sweep_failure(self._owner, exc)
        else:
            log.debug("sweep still failing: %s", exc)

    def succeeded(self) -> bool:
        """A turn succeeded: whether that ends an outage (then logged with its length)."""
        if self._since is None:
            return False
        log.warning(
            "sweeper of %s recovered after %.1fs", self._owner, self._monotonic() - self._since
        )
        self._since = None
        return True
