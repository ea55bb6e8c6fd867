"""Internal: delivery history - the record of each attempt, and the in-process journal.

Every adapter keeps, per item id, its most recent attempts (CONTRACT section 18): who ran it
(``node``), when it started and ended (by the store's clock: the database's, on MongoDB),
how it ended (``"succeeded"``, ``"failed"``, ``"timed_out"``, ``"lapsed"``) and, for a
failure, the error's type, message and a traceback excerpt (its last frames, bounded).

The delivery core calls a :class:`Journal` around each handler call
(:meth:`Journal.opened` before, :meth:`Journal.closed` after, with the outcome); what a
journal does with the record is the adapter's business: :class:`MemoryHistory` keeps it in
process, :class:`flowsched.mongo.history.MongoHistory` sends it with the next settlement
(no round trip of its own on the firing path).

:class:`HistoryPolicy` holds the two settings: ``limit`` (``ipf-scheduler.flowsched.
history-limit``, default 20 attempts per item) and ``retention`` (``history-retention``,
default 7 days: how long an item's history is kept after its last attempt, also once the
item itself is gone).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from flowsched.handler_limits import HandlerTimedOut
from flowsched.outcomes import (
    Completed,
    DeadLettered,
    Failure,
    NextSlot,
    Outcome,
    Redeliver,
    storable_error,
)
from flowsched.records import ScheduleItem
from flowsched.steering import Attempt

if TYPE_CHECKING:
    from flowsched.config.scheduler_settings import SchedulerSettings

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_HISTORY_RETENTION",
    "MAX_HISTORY_LIMIT",
    "TRACEBACK_CHARS",
    "TRACEBACK_FRAMES",
    "Failure",
    "HistoryPolicy",
    "Journal",
    "MemoryHistory",
    "OpenAttempt",
    "failure_of",
    "history_policy",
    "finished_attempt",
    "close_attempt",
    "local_node",
    "open_attempt",
    "with_failure",
]

log = logging.getLogger("flowsched.delivery")
OutcomeT = TypeVar("OutcomeT", bound=Outcome)

DEFAULT_HISTORY_LIMIT = 20
DEFAULT_HISTORY_RETENTION = timedelta(days=7)
MAX_HISTORY_LIMIT = 1000
"""The most attempts kept per item (a history is read whole)."""
TRACEBACK_FRAMES = 5
"""The last frames of a failure's traceback kept in its attempt record."""
TRACEBACK_CHARS = 2000
"""The most characters of a traceback excerpt."""
MAX_GONE_IDS = 100_000
"""In process: the most item ids whose history is kept (the least recently written go first),
so that a million one-shot timers do not keep a million histories for a week."""


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    """How much history an adapter keeps: ``limit`` attempts per item (1 to
    :data:`MAX_HISTORY_LIMIT`), for ``retention`` after the item's last attempt.

    ``ValueError`` naming the setting for a bad value."""

    limit: int = DEFAULT_HISTORY_LIMIT
    retention: timedelta = DEFAULT_HISTORY_RETENTION

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int):
            raise ValueError(f"history limit must be a whole number (got {self.limit!r})")
        if not 1 <= self.limit <= MAX_HISTORY_LIMIT:
            raise ValueError(
                f"history limit must be from 1 to {MAX_HISTORY_LIMIT} (got {self.limit})"
            )
        if not isinstance(self.retention, timedelta) or self.retention <= timedelta(0):
            raise ValueError(
                f"history retention must be a positive timedelta (got {self.retention!r})"
            )


def failure_of(error: BaseException, outcome: Literal["failed", "timed_out"] = "failed") -> Failure:
    """The record of ``error``: its type's name, its message (storable, bounded) and the
    last :data:`TRACEBACK_FRAMES` frames of its traceback (at most :data:`TRACEBACK_CHARS`)."""
    return Failure(outcome, type(error).__name__, storable_error(str(error)), excerpt(error))


def excerpt(error: BaseException) -> str | None:
    """The last frames of ``error``'s traceback and its last line, bounded; ``None`` when
    it was never raised (no traceback)."""
    if error.__traceback__ is None:
        return None
    frames = traceback.extract_tb(error.__traceback__)[-TRACEBACK_FRAMES:]
    lines = traceback.format_list(frames)
    lines.extend(traceback.format_exception_only(type(error), error))
    text = "".join(lines)
    if len(text) > TRACEBACK_CHARS:
        text = "\u2026" + text[-(TRACEBACK_CHARS - 1) :]
    return storable_error(text)


def local_node() -> str:
    """The node name an in-process adapter records: ``<host>:<pid>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def history_policy(settings: SchedulerSettings) -> HistoryPolicy:
    """The policy ``ipf-scheduler.flowsched.history-limit`` and ``history-retention`` set."""
    return HistoryPolicy(settings.history_limit, settings.history_retention)


class OpenAttempt(NamedTuple):
    """An attempt whose handler runs: what :meth:`Journal.opened` returns (a tuple: one is
    made per delivery)."""

    item_id: str
    generation: int
    attempt: int
    started: datetime

    def running(self, node: str) -> Attempt:
        return Attempt(node, self.started, generation=self.generation, attempt=self.attempt)


def finished_attempt(
    opened: OpenAttempt, node: str, ended: datetime, outcome: Outcome | Failure
) -> Attempt:
    """The record of ``opened`` ended at ``ended`` with ``outcome`` (a delivery outcome, or
    the :class:`Failure` of a run whose outcome is not a failure's, such as a counted tick)."""
    failure = outcome if isinstance(outcome, Failure) else failure_in(outcome)
    if failure is None:
        return Attempt(
            node,
            opened.started,
            ended,
            "succeeded",
            generation=opened.generation,
            attempt=opened.attempt,
        )
    return Attempt(
        node,
        opened.started,
        ended,
        failure.outcome,
        failure.error_type,
        failure.error_message,
        failure.traceback,
        generation=opened.generation,
        attempt=opened.attempt,
    )


def failure_in(outcome: Outcome) -> Failure | None:
    """The failure an outcome carries (``None``: the handler returned)."""
    if isinstance(outcome, Completed):
        return None
    failure = getattr(outcome, "failure", None)
    if isinstance(failure, Failure):
        return failure
    error = getattr(outcome, "error", None)
    if error is None:
        dead = getattr(outcome, "dead", None)
        error = None if dead is None else dead.error
    if not error:
        return None
    kind, _, message = str(error).partition(": ")
    return Failure("failed", kind, message or kind, None)


class Journal:
    """Told of every attempt by the delivery core; the base class records nothing.

    ``opened`` is called right before a handler is called, ``closed`` right after it returned
    or raised (with the :data:`~flowsched.delivery.Outcome`). Both are called on the thread
    or task that runs the handler; they must be cheap and never raise."""

    def __init__(self, clock: Callable[[], datetime], node: str) -> None:
        self.now = clock
        self.node = node

    def opened(self, item: ScheduleItem, attempt: int) -> OpenAttempt:
        return OpenAttempt(item.id, item.generation, attempt, self.now())

    def closed(self, opened: OpenAttempt, outcome: Outcome) -> None:
        """Record ``opened`` as ended now with ``outcome``."""


class MemoryHistory(Journal):
    """The in-process history (both in-memory adapters): per item id its last ``limit``
    attempts, the running one included, kept until ``retention`` after the last one ended
    (and for at most :data:`MAX_GONE_IDS` ids). Thread-safe.

    Cheap per delivery: an attempt is kept as it came (the open record, its end and the
    outcome) and turned into an :class:`Attempt` when :meth:`history` reads it."""

    def __init__(
        self, clock: Callable[[], datetime], node: str, policy: HistoryPolicy | None = None
    ) -> None:
        super().__init__(clock, node)
        self.policy = policy or HistoryPolicy()
        self._lock = threading.Lock()
        # id -> [last end, (opened, ended, outcome), ...]; least recently written first.
        self._logs: OrderedDict[str, list[Any]] = OrderedDict()
        self._running: dict[int, OpenAttempt] = {}

    def opened(self, item: ScheduleItem, attempt: int) -> OpenAttempt:
        opened = OpenAttempt(item.id, item.generation, attempt, self.now())
        self._running[id(opened)] = opened  # one dict store: atomic
        return opened

    def closed(self, opened: OpenAttempt, outcome: Outcome) -> None:
        ended = self.now()
        key = opened.item_id
        with self._lock:
            self._running.pop(id(opened), None)
            logs = self._logs
            found = logs.get(key)
            if found is None:
                logs[key] = [ended, (opened, ended, outcome)]
                if len(logs) > MAX_GONE_IDS:
                    logs.popitem(last=False)
                return
            found[0] = ended
            found.append((opened, ended, outcome))
            if len(found) > self.policy.limit + 1:
                del found[1]
            logs.move_to_end(key)

    def history(self, item_id: str) -> list[Attempt]:
        """The recent attempts of ``item_id``, oldest first (a running one last, open)."""
        now = self.now()
        with self._lock:
            self._expire(now)
            found = self._logs.get(item_id)
            done = list(found[1:]) if found is not None else []
            running = [o for o in self._running.values() if o.item_id == item_id]
        attempts = [finished_attempt(o, self.node, ended, out) for o, ended, out in done]
        attempts.extend(o.running(self.node) for o in running)
        attempts.sort(key=lambda a: a.started)
        return attempts[-self.policy.limit :]

    def _expire(self, now: datetime) -> None:
        logs, retention = self._logs, self.policy.retention
        while logs:
            key, found = next(iter(logs.items()))
            if found[0] + retention > now:
                return
            del logs[key]


def open_attempt(journal: Journal | None, item: ScheduleItem, attempt: int) -> OpenAttempt | None:
    """Tell ``journal`` (if any) a handler call starts; the record to close."""
    return None if journal is None else journal.opened(item, attempt)


def close_attempt(
    journal: Journal | None, opened: OpenAttempt | None, outcome: OutcomeT
) -> OutcomeT:
    """Tell ``journal`` the call ``opened`` ended with ``outcome``; return ``outcome``. A
    failing journal is logged, never a failed delivery."""
    if opened is not None and journal is not None:
        try:
            journal.closed(opened, outcome)
        except Exception:
            log.exception("recording the attempt of %s failed (ignored)", opened.item_id)
    return outcome


def with_failure(outcome: Outcome, error: BaseException) -> Outcome:
    """``outcome`` (of a run that raised ``error``) carrying the error's record: a
    :class:`~flowsched.handler_limits.HandlerTimedOut` is ``"timed_out"``, else ``"failed"``."""
    if isinstance(outcome, Redeliver | DeadLettered | NextSlot):
        kind: Literal["failed", "timed_out"] = "failed"
        if isinstance(error, HandlerTimedOut):
            kind = "timed_out"
        return replace(outcome, failure=failure_of(error, kind))
    return outcome
