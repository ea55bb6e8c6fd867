"""Internal: driver errors as the store interface says them, for
:class:`~flowsched.mongo.timer_store.MongoTimerStore` and its async twin."""

from __future__ import annotations

from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.mongo.transient import is_transient

__all__ = ["outage"]

_WRITES = frozenset(
    {"put", "remove", "remove_flow", "claim_due", "confirm_start", "renew", "release", "settle"}
    | {"requeue", "pause", "resume"}
)


def outage(exc: BaseException, what: str, store: str = "MongoTimerStore") -> BaseException:
    """What ``store`` raises for ``exc``, met by its method ``what``: a transient driver
    error becomes :class:`SchedulerUnavailable` when nothing was sent (no server selected)
    or the method only reads, :class:`OutcomeUnknown` when a write was sent and its reply
    lost. Anything else is returned as it is (the store refused the request)."""
    if not isinstance(exc, PyMongoError) or not is_transient(exc):
        return exc
    where = f"{store}.{what}"
    if what in _WRITES and not isinstance(exc, ServerSelectionTimeoutError):
        return OutcomeUnknown(
            f"{where}: {type(exc).__name__}: {exc}; the write may or may not have taken effect"
        )
    return SchedulerUnavailable(f"{where}: {type(exc).__name__}: {exc}; nothing was applied")
