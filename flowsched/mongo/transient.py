"""Internal: MongoDB outages - which driver errors are transient (worth retrying rather than
a bad request), the one-line message of an unreachable server, and the backoff of the
change-stream readers. What a node does in an outage is the node core's
(:mod:`flowsched.node.outage`); how a store call says it, :mod:`flowsched.mongo.timer_errors`.
"""

from __future__ import annotations

import logging
import re
from typing import Any, TypeVar

from pymongo.errors import (
    ConnectionFailure,
    ExecutionTimeout,
    OperationFailure,
    PyMongoError,
)

__all__ = ["OutageBackoff", "hosts", "is_transient", "unavailable"]

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
