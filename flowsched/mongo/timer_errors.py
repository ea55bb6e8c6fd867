"""Internal: driver errors as the store interface says them, for
:class:`~flowsched.mongo.timer_store.MongoTimerStore` and its async twin."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

from flowsched.errors import OutcomeUnknown, SchedulerUnavailable
from flowsched.mongo.transient import is_transient, unavailable
from flowsched.store.call_budget import port_call

__all__ = ["outage"]

_WRITES = frozenset(
    {"put", "remove", "remove_flow", "claim_due", "confirm_start", "renew", "release", "settle"}
    | {"requeue", "pause", "resume"}
)


_PORT = {"put": "schedule", "remove": "cancel", "remove_flow": "cancel_flow"}
"""The port's names of the store's writes, for messages (a face's caller made the call)."""


def outage(
    exc: BaseException,
    what: str,
    store: str = "MongoTimerStore",
    *,
    subject: str | None = None,
    named: str | None = None,
    collection: Any = None,
    op_timeout: timedelta | None = None,
) -> BaseException:
    """What ``store`` raises for ``exc``, met by its method ``what`` (on ``subject``, an
    item or flow id; for the store method ``named``, when ``what`` ran first for it, as the
    first call's ``open``): a transient driver error becomes :class:`SchedulerUnavailable` when
    nothing was sent (no server selected) or the method only reads, :class:`OutcomeUnknown`
    when a write was sent and its reply lost. Anything else is returned as it is (the store
    refused the request).

    The message is one line (docs/reference/configuration.md, ``op-timeout``): ``MongoDB at
    db1:27017 unreachable: schedule('t') did not take effect within op_timeout=10s
    (ServerSelectionTimeoutError: db1:27017: [Errno 111] Connection refused); nothing was
    applied``, the call named as the port names it (the port call a face is making, when it
    said so: :func:`~flowsched.store.call_budget.port_call`); the driver's error, with its
    topology, is the ``__cause__``.
    """
    if not isinstance(exc, PyMongoError) or not is_transient(exc):
        return exc
    name = named or what
    call = port_call() or _PORT.get(name, name) + (f"({subject!r})" if subject else "")
    budget = op_timeout.total_seconds() if op_timeout is not None else 0.0
    line = unavailable(call, budget, exc, collection)
    if op_timeout is None:
        line = line.replace(" within op_timeout=0s", "", 1)
    if what not in _WRITES:
        return SchedulerUnavailable(line)
    if isinstance(exc, ServerSelectionTimeoutError):
        return SchedulerUnavailable(f"{line}; nothing was applied")
    return OutcomeUnknown(line.replace("did not take", "may or may not have taken", 1))
