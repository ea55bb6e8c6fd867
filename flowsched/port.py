"""Internal: the scheduler port (``SchedulerPort``, ``ScheduleItem``) every adapter implements.

Adapters (``InMemoryScheduler``, ``MongoScheduler``) implement :class:`SchedulerPort`; the flow
domain and user code talk only to this interface.

Guarantees every adapter keeps:

* ``schedule`` stores an item; an item with the same ``id`` is replaced.
* Once ``schedule`` or ``cancel`` has returned, the old form of a replaced or cancelled item is
  never delivered again (a delivery already running may finish), and a stale delivery never
  removes the item that replaced it.
* Delivery is at least once: a handler that returns completes the item; one that raises is
  redelivered with backoff. "Nothing to do" is success — return normally, or the item is
  redelivered for as long as it keeps failing.
* A recurring item (one with a :class:`~flowsched.recurrence.Recurrence`) is not removed by a
  tick: it moves on to its next slot. After a gap only the latest due slot runs, once; a slot
  at or before the applied one never runs again (across nodes too); a failed tick still
  counts unless ``retry_failed``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from types import TracebackType
from typing import Any, Self

from flowsched.clock import ensure_utc
from flowsched.errors import FlowschedError
from flowsched.recurrence import Recurrence

__all__ = [
    "MAX_HANDLER_NAME",
    "MAX_ID_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "DeadLetter",
    "FailedHandler",
    "Handler",
    "Recurrence",
    "ScheduleItem",
    "ScheduleKind",
    "SchedulerPort",
    "SchedulerUnavailable",
    "check_id",
    "check_handler_name",
    "encode_payload",
    "kind_route",
    "name_route",
]

MAX_PAYLOAD_BYTES = 1024
"""Largest payload, in bytes of compact UTF-8 JSON. Pass an id, not the data."""

MAX_PAYLOAD_DEPTH = 32
"""Deepest nesting of objects and lists in a payload (checked before encoding it)."""

MAX_ID_BYTES = 1024
"""Longest item id (and flow id), in UTF-8 bytes. Both adapters accept the same ids."""


class ScheduleKind(StrEnum):
    """What a scheduled item is for; handlers subscribe per kind."""

    ACTION_TIMEOUT = "ACTION_TIMEOUT"
    ACTION_RETRY = "ACTION_RETRY"
    PROCESSING_TIMEOUT = "PROCESSING_TIMEOUT"
    TIMER = "TIMER"


MAX_HANDLER_NAME = 200
"""Longest handler name, in characters."""


def check_handler_name(name: object) -> str:
    """``name`` if it is a valid handler name (a wire name: a non-empty string of at most
    :data:`MAX_HANDLER_NAME` characters without control characters); else ``ValueError``
    naming it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"handler name must be a non-empty string (got {name!r})")
    if len(name) > MAX_HANDLER_NAME:
        raise ValueError(
            f"handler name {name[:40]!r}... is {len(name)} characters; the limit is "
            f"{MAX_HANDLER_NAME}"
        )
    if any(ord(char) < 32 or 127 <= ord(char) < 160 for char in name):
        raise ValueError(f"handler name {name!r} contains a control character")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"handler name {name!r} is not valid Unicode (a lone surrogate)") from None
    return name


_KIND_ROUTES: dict[str, str] = {kind: f"k:{kind.value}" for kind in ScheduleKind}


def kind_route(kind: ScheduleKind) -> str:
    """The route of items of ``kind`` without a handler name: ``"k:<KIND>"``.

    >>> kind_route(ScheduleKind.TIMER)
    'k:TIMER'
    """
    return _KIND_ROUTES[kind]


def name_route(name: str) -> str:
    """The route of items addressed to handler ``name``: ``"h:<name>"``.

    >>> name_route("send-reminder")
    'h:send-reminder'
    """
    return f"h:{name}"


class SchedulerUnavailable(FlowschedError, RuntimeError):
    """The scheduler's store could not be reached in time; the call did not take effect."""


def check_id(value: object, what: str = "id") -> str:
    """``value`` if it is a usable id: a non-empty string of at most :data:`MAX_ID_BYTES`
    UTF-8 bytes, without NUL characters or lone surrogates (which MongoDB cannot store);
    ``ValueError`` naming ``what`` otherwise. The same rule on every adapter."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string (got {_short(value)})")
    if len(value) > MAX_ID_BYTES:  # cheap bound first: a character is at least one byte
        raise ValueError(f"{what} is {len(value)} characters; the limit is {MAX_ID_BYTES} bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} {_short(value)} is not valid Unicode text (a lone surrogate)"
        ) from None
    if size > MAX_ID_BYTES:
        raise ValueError(f"{what} is {size} bytes in UTF-8; the limit is {MAX_ID_BYTES} bytes")
    if "\x00" in value:
        raise ValueError(f"{what} {_short(value)} contains a NUL character")
    return value


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _check_depth(payload: Mapping[str, Any]) -> None:
    """``ValueError`` if ``payload`` nests deeper than :data:`MAX_PAYLOAD_DEPTH` (checked
    without recursion, so a payload nested thousands deep cannot raise RecursionError)."""
    stack: list[tuple[object, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            if any(isinstance(key, str) and "\x00" in key for key in value):
                raise ValueError("payload has a key with a NUL character (MongoDB cannot store it)")
            children: Iterable[object] = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > MAX_PAYLOAD_DEPTH:
            raise ValueError(
                f"payload nests objects/lists more than {MAX_PAYLOAD_DEPTH} deep "
                "(pass an id and let the handler read the data)"
            )
        stack.extend((child, depth + 1) for child in children)


def encode_payload(payload: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON of ``payload``; ``ValueError`` if not JSON, nested more than
    :data:`MAX_PAYLOAD_DEPTH` deep, or over the limit."""
    _check_depth(payload)
    try:
        encoded = json.dumps(
            payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"payload must be JSON-serialisable: {exc}") from None
    if len(encoded) > MAX_PAYLOAD_BYTES:
        raise ValueError(
            f"payload is {len(encoded)} bytes encoded as JSON; the limit is "
            f"{MAX_PAYLOAD_BYTES} bytes (pass an id and let the handler read the data)"
        )
    return encoded


@dataclass(frozen=True, slots=True)
class ScheduleItem:
    """One timer: deliver ``kind`` for ``id`` at ``due``.

    ``id`` is the timer's identity: scheduling again under one id replaces the earlier
    schedule. ``due`` must be timezone-aware (it is kept in UTC). ``payload`` is a JSON object
    of at most 1024 encoded bytes. ``generation`` is set by the scheduler each time the item
    is scheduled; :attr:`key` (``"<id>#<generation>"``) is stable across redeliveries of one
    schedule and is a good idempotency key for a handler's side effects.

    ``handler`` addresses the item to a named handler (see :meth:`SchedulerPort.register`);
    ``None`` routes it by ``kind`` (see :meth:`SchedulerPort.subscribe`). :attr:`route` is
    the one key both adapters route on.

    A *recurring* item has a ``recurrence`` with its ``start`` set (use
    :meth:`SchedulerPort.schedule_recurring`, which anchors it at the scheduler's now). Stored,
    its ``due`` is when its next slot is looked for and ``previous`` the last slot applied
    (``None`` before the first tick). Delivered, ``due`` is the slot the tick runs for and
    ``previous`` the slot applied before it; :attr:`slot_key` names the tick.

    >>> from datetime import UTC, datetime
    >>> ScheduleItem("expire-o-1", ScheduleKind.TIMER, datetime(2026, 1, 1, tzinfo=UTC)).id
    'expire-o-1'
    """

    id: str
    kind: ScheduleKind
    due: datetime
    flow_id: str | None = None
    payload: Mapping[str, Any] | None = None
    generation: int = field(default=0, compare=False)
    recurrence: Recurrence | None = None
    previous: datetime | None = field(default=None, compare=False)
    handler: str | None = None

    def __post_init__(self) -> None:
        check_id(self.id, "ScheduleItem id")
        if self.flow_id is not None:
            check_id(self.flow_id, f"ScheduleItem {self.id!r}: flow_id")
        if not isinstance(self.kind, ScheduleKind):
            try:
                object.__setattr__(self, "kind", ScheduleKind(self.kind))
            except ValueError:
                valid = ", ".join(k.value for k in ScheduleKind)
                raise ValueError(
                    f"ScheduleItem {self.id!r}: unknown kind {self.kind!r} (valid: {valid})"
                ) from None
        if not isinstance(self.due, datetime):
            raise TypeError(f"ScheduleItem {self.id!r}: due must be a datetime")
        object.__setattr__(self, "due", ensure_utc(self.due, f"ScheduleItem {self.id!r} due"))
        if self.payload is not None:
            if not isinstance(self.payload, Mapping):
                raise ValueError(
                    f"ScheduleItem {self.id!r}: payload must be a JSON object (dict), "
                    f"got {type(self.payload).__name__}"
                )
            try:
                encoded = encode_payload(self.payload)
            except ValueError as exc:
                raise ValueError(f"ScheduleItem {self.id!r}: {exc}") from None
            # Keep a private copy, so later changes to the caller's dict change nothing here.
            object.__setattr__(self, "payload", json.loads(encoded))
        if self.recurrence is not None or self.previous is not None:
            self._check_recurring()
        if self.handler is not None:
            try:
                check_handler_name(self.handler)
            except ValueError as exc:
                raise ValueError(f"ScheduleItem {self.id!r}: {exc}") from None

    def _check_recurring(self) -> None:
        if self.recurrence is None:
            raise ValueError(f"ScheduleItem {self.id!r}: previous is only for recurring items")
        if not isinstance(self.recurrence, Recurrence):
            raise ValueError(
                f"ScheduleItem {self.id!r}: recurrence must be a Recurrence "
                f"(got {self.recurrence!r})"
            )
        if self.recurrence.start is None:
            raise ValueError(
                f"ScheduleItem {self.id!r}: the recurrence has no start; use "
                "scheduler.schedule_recurring(...) (slots counted from the scheduler's now) or "
                "give Recurrence.every(..., start=...)"
            )
        if self.previous is not None:
            previous = ensure_utc(self.previous, f"ScheduleItem {self.id!r} previous")
            object.__setattr__(self, "previous", previous)

    def __hash__(self) -> int:
        return hash((self.id, self.generation))

    @property
    def route(self) -> str:
        """Who may deliver it: ``"h:<handler>"`` for a named handler, else ``"k:<KIND>"``.

        >>> from datetime import UTC, datetime
        >>> due = datetime(2026, 1, 1, tzinfo=UTC)
        >>> ScheduleItem("t-1", ScheduleKind.TIMER, due, handler="send-reminder").route
        'h:send-reminder'
        >>> ScheduleItem("t-2", ScheduleKind.TIMER, due).route
        'k:TIMER'
        """
        handler = self.handler
        if handler is None:
            return _KIND_ROUTES[self.kind]
        return f"h:{handler}"

    @property
    def key(self) -> str:
        """``"<id>#<generation>"``: the same on every redelivery of one schedule."""
        return f"{self.id}#{self.generation}"

    @property
    def slot_key(self) -> str:
        """``"<id>#<generation>@<slot>"`` for a recurring item's tick (the same on every
        redelivery of that slot): an idempotency key per tick. For a one-shot item, :attr:`key`."""
        if self.recurrence is None:
            return self.key
        return f"{self.key}@{self.due.isoformat()}"

    def with_generation(self, generation: int) -> ScheduleItem:
        """A copy carrying ``generation`` (no re-validation: the item is already valid)."""
        # On every schedule() call of the in-memory adapter: slot descriptors are about three
        # times faster than object.__setattr__ in a loop.
        copy: ScheduleItem = _new_object(ScheduleItem)
        _set_id(copy, self.id)
        _set_kind(copy, self.kind)
        _set_due(copy, self.due)
        _set_flow_id(copy, self.flow_id)
        _set_payload(copy, self.payload)
        _set_generation(copy, generation)
        _set_recurrence(copy, self.recurrence)
        _set_previous(copy, self.previous)
        _set_handler(copy, self.handler)
        return copy


_new_object = object.__new__
(
    _set_id,
    _set_kind,
    _set_due,
    _set_flow_id,
    _set_payload,
    _set_generation,
    _set_recurrence,
    _set_previous,
    _set_handler,
) = (
    ScheduleItem.__dict__[name].__set__
    for name in (
        "id",
        "kind",
        "due",
        "flow_id",
        "payload",
        "generation",
        "recurrence",
        "previous",
        "handler",
    )
)


Handler = Callable[[ScheduleItem, int], object]
"""``handler(item, attempt)``: ``attempt`` counts earlier failed deliveries (0 the first time).
Return normally to complete the item; raise to have it redelivered with backoff."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An item that failed ``attempts`` times and was set aside (``max_attempts`` reached)."""

    item: ScheduleItem
    attempts: int
    error: str
    dead_at: datetime


FailedHandler = Callable[[DeadLetter], object]
"""``on_failed(dead_letter)``: told when an item of a named handler is dead-lettered."""


class SchedulerPort(ABC):
    """The interface both scheduler adapters implement.

    Use it as a context manager to start background firing and close it on exit::

        with InMemoryScheduler() as scheduler:
            scheduler.subscribe(ScheduleKind.TIMER, handler)
            scheduler.schedule(ScheduleItem("t-1", ScheduleKind.TIMER, due))
    """

    @abstractmethod
    def schedule(self, item: ScheduleItem) -> ScheduleItem:
        """Store ``item``, replacing any item with the same id; return it with its generation."""

    @abstractmethod
    def now(self) -> datetime:
        """The time on this scheduler's clock (timezone-aware UTC): due times are compared
        against it."""

    def create_single_timer(
        self,
        timer_id: str,
        delay: timedelta | datetime,
        handler: str,
        arg: Mapping[str, Any] | None = None,
    ) -> ScheduleItem:
        """Schedule a one-shot ``TIMER`` for the named ``handler``; return it as stored.

        Due ``delay`` from now (a ``timedelta``), or at ``delay`` (a timezone-aware
        ``datetime``). ``arg``, a JSON object of at most 1024 encoded bytes, arrives as the
        item's ``payload``. Scheduling under an existing ``timer_id`` replaces that item;
        ``cancel(timer_id)`` cancels it.

        >>> from datetime import UTC, datetime, timedelta
        >>> from flowsched import InMemoryScheduler, ManualClock
        >>> clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
        >>> scheduler = InMemoryScheduler(clock=clock)
        >>> scheduler.register("expire-order", lambda item, attempt: print(item.payload))
        >>> _ = scheduler.create_single_timer(
        ...     "expire-o-1", timedelta(minutes=5), "expire-order", {"order": "o-1"})
        >>> _ = clock.advance(timedelta(minutes=5))
        {'order': 'o-1'}
        """
        if isinstance(delay, timedelta):
            due = self.now() + delay
        elif isinstance(delay, datetime):
            due = ensure_utc(delay, f"create_single_timer({timer_id!r}) delay")
        else:
            raise TypeError(
                f"create_single_timer({timer_id!r}): delay must be a timedelta or an aware "
                f"datetime (got {delay!r})"
            )
        item = ScheduleItem(timer_id, ScheduleKind.TIMER, due, payload=arg, handler=handler)
        return self.schedule(item)

    def schedule_recurring(
        self,
        item_id: str,
        recurrence: Recurrence,
        kind: ScheduleKind = ScheduleKind.TIMER,
        flow_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        *,
        handler: str | None = None,
    ) -> ScheduleItem:
        """Schedule a recurring item, replacing any item with that id; return it as stored.

        Slots are counted from the scheduler's now (unless ``recurrence`` has a ``start``):
        ``Recurrence.every(timedelta(hours=1))`` scheduled at 10:00 ticks at 11:00, 12:00, ...
        The item is due at its first slot; replacing it restarts the slot count. ``handler``
        addresses it to a named handler (else it is routed by ``kind``).

        >>> from datetime import UTC, datetime, timedelta
        >>> from flowsched import InMemoryScheduler, ManualClock
        >>> scheduler = InMemoryScheduler(clock=ManualClock(datetime(2026, 1, 1, 10, tzinfo=UTC)))
        >>> every_hour = Recurrence.every(timedelta(hours=1))
        >>> scheduler.schedule_recurring("sweep", every_hour).due.isoformat()
        '2026-01-01T11:00:00+00:00'
        """
        anchored = recurrence.anchored(self.now())
        assert anchored.start is not None  # anchored() sets it
        first = anchored.next_slot(anchored.start)
        return self.schedule(
            ScheduleItem(
                item_id, kind, first, flow_id, payload, recurrence=anchored, handler=handler
            )
        )

    @abstractmethod
    def cancel(self, item_id: str) -> bool:
        """Remove the item; ``False`` (not an error) if there was none."""

    @abstractmethod
    def cancel_flow(self, flow_id: str) -> int:
        """Remove every item of that flow instance; return how many were removed."""

    @abstractmethod
    def exists(self, item_id: str) -> bool:
        """Whether the item is still scheduled (not fired successfully, not cancelled)."""

    @abstractmethod
    def get(self, item_id: str) -> ScheduleItem | None:
        """The item as currently scheduled (its due time moves on redelivery), or ``None``."""

    @abstractmethod
    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        """Deliver due items of ``kind`` that have no handler name to ``handler``.

        One handler per kind: ``ValueError`` if ``kind`` already has one (nothing is
        replaced). Items of a kind nobody subscribed to stay scheduled until someone does."""

    @abstractmethod
    def register(
        self, name: str, handler: Handler, *, on_failed: FailedHandler | None = None
    ) -> None:
        """Deliver due items addressed to ``name`` (``ScheduleItem(..., handler=name)``) to
        ``handler``; ``on_failed(dead_letter)`` is called when one of them is dead-lettered
        (beside the observer; its errors are logged and change nothing).

        ``ValueError`` if ``name`` is not a valid handler name or is already registered on
        this scheduler. Items addressed to a name nobody registered stay scheduled until a
        scheduler (this one later, or another node) registers it."""

    @abstractmethod
    def dead_letters(self) -> list[DeadLetter]:
        """Items that exhausted ``max_attempts``, oldest first."""

    @abstractmethod
    def requeue(self, item_id: str, due: datetime | None = None) -> bool:
        """Move a dead letter back into the schedule (due now, or at ``due``), attempts reset."""

    @abstractmethod
    def start(self) -> None:
        """Begin firing in the background (idempotent)."""

    @abstractmethod
    def close(self) -> None:
        """Stop firing and wait for handlers in flight (idempotent)."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
