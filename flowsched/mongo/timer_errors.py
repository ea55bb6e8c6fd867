"""Internal: driver errors as the store interface says them, for
:class:`~flowsched.mongo.timer_store.MongoTimerStore`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.mongo.transient import is_transient

__all__ = ["outages"]

P = ParamSpec("P")
R = TypeVar("R")
_WRITES = frozenset(
    {"put", "remove", "remove_flow", "claim_due", "confirm_start", "renew", "release", "settle"}
    | {"requeue", "pause", "resume"}
)


def outages(method: Callable[P, R]) -> Callable[P, R]:
    """A driver outage as the store interface says it: :class:`SchedulerUnavailable` when
    nothing was sent (no server selected) or the call only reads, :class:`OutcomeUnknown`
    when a write was sent and its reply lost. Other driver errors go through as they are
    (the store refused the request)."""
    write = method.__name__ in _WRITES

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except PyMongoError as exc:
            if not is_transient(exc):
                raise
            what = f"MongoTimerStore.{method.__name__}"
            if write and not isinstance(exc, ServerSelectionTimeoutError):
                raise OutcomeUnknown(
                    f"{what}: {type(exc).__name__}: {exc}; the write may or may not have "
                    "taken effect"
                ) from exc
            raise SchedulerUnavailable(
                f"{what}: {type(exc).__name__}: {exc}; nothing was applied"
            ) from exc

    return call
