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
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import FrozenInstanceError, dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import TracebackType
from typing import Any, NoReturn, Self, cast, final

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
    "kind_route",
    "name_route",
    "recurring_item",
    "route_target",
    "single_timer_item",
    "short_repr",
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


_NAME_PREFIX = "h:"
_KIND_PREFIX = "k:"
_KIND_ROUTES: dict[str, str] = {kind: _KIND_PREFIX + kind.value for kind in ScheduleKind}


def kind_route(kind: str) -> str:
    """The route of items of ``kind`` without a handler name: ``"k:<KIND>"`` (``kind``: a
    :class:`ScheduleKind`, or a kind name as stored).

    >>> kind_route(ScheduleKind.TIMER)
    'k:TIMER'
    """
    return _KIND_ROUTES.get(kind) or _KIND_PREFIX + kind


def name_route(name: str) -> str:
    """The route of items addressed to handler ``name``: ``"h:<name>"``.

    >>> name_route("send-reminder")
    'h:send-reminder'
    """
    return _NAME_PREFIX + name


def route_target(route: object) -> tuple[str | None, str | None]:
    """``(handler, kind)`` of a stored route: one of them is set for a route made by
    :func:`name_route` or :func:`kind_route`, neither for anything else.

    >>> route_target("h:send-reminder"), route_target("k:TIMER"), route_target(None)
    (('send-reminder', None), (None, 'TIMER'), (None, None))
    """
    if isinstance(route, str):
        if route.startswith(_NAME_PREFIX):
            return route[len(_NAME_PREFIX) :], None
        if route.startswith(_KIND_PREFIX):
            return None, route[len(_KIND_PREFIX) :]
    return None, None


class SchedulerUnavailable(FlowschedError, RuntimeError):
    """The scheduler's store could not be reached in time; the call did not take effect."""


def check_id(value: object, what: str = "id") -> str:
    """``value`` if it is a usable id: a non-empty string of at most :data:`MAX_ID_BYTES`
    UTF-8 bytes, without NUL characters or lone surrogates (which MongoDB cannot store);
    ``ValueError`` naming ``what`` otherwise. The same rule on every adapter."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string (got {short_repr(value, 80)})")
    if len(value) > MAX_ID_BYTES:  # cheap bound first: a character is at least one byte
        raise ValueError(f"{what} is {len(value)} characters; the limit is {MAX_ID_BYTES} bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} {short_repr(value, 80)} is not valid Unicode text (a lone surrogate)"
        ) from None
    if size > MAX_ID_BYTES:
        raise ValueError(f"{what} is {size} bytes in UTF-8; the limit is {MAX_ID_BYTES} bytes")
    if "\x00" in value:
        raise ValueError(f"{what} {short_repr(value, 80)} contains a NUL character")
    return value


def short_repr(value: object, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 16 MB id in a message helps no one)."""
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


_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _payload_text(payload: Mapping[str, Any]) -> str:
    """Compact JSON of ``payload``, interned: equal payloads (the flow domain's timers of one
    state, for example) share one string in memory, however many items carry them."""
    try:
        text: str = _JSON.encode(payload)
    except RecursionError:
        _check_depth(payload)  # raises, naming the limit
        raise ValueError("payload must be JSON-serialisable: nested too deep") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload must be JSON-serialisable: {exc}") from None
    # Nesting past the limit takes more brackets than the limit, and a NUL shows as an
    # escape: only then is the payload walked (a flat one costs two scans of its text).
    if text.count("{") + text.count("[") > MAX_PAYLOAD_DEPTH or "\\u0000" in text:
        _check_depth(payload)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(
            f"payload is {size} bytes encoded as JSON; the limit is "
            f"{MAX_PAYLOAD_BYTES} bytes (pass an id and let the handler read the data)"
        )
    return sys.intern(text)


class _ItemSlots:
    """Internal: the fields of a :class:`ScheduleItem` (its storage, shared by the two
    classes below; see ScheduleItem's construction note)."""

    __slots__ = ("_extra", "due", "flow_id", "generation", "handler", "id", "kind")


class _Filling(_ItemSlots):
    """Internal: a :class:`ScheduleItem` while its constructor fills it in - the same
    layout without the frozen ``__setattr__``, so each field is one plain attribute store."""

    __slots__ = ()


@final
class ScheduleItem(_ItemSlots):
    """One timer: deliver ``kind`` for ``id`` at ``due``.

    ``id`` is the timer's identity: scheduling again under one id replaces the earlier
    schedule. ``due`` must be timezone-aware (it is kept in UTC). ``payload`` is a JSON object
    of at most 1024 encoded bytes; the item keeps it encoded (compact JSON, equal payloads
    sharing one string), and
    :attr:`payload` decodes a fresh dict on each read, so changing it changes nothing stored.
    ``generation`` is set by the scheduler each time the item is scheduled; :attr:`key`
    (``"<id>#<generation>"``) is stable across redeliveries of one schedule and is a good
    idempotency key for a handler's side effects.

    ``handler`` addresses the item to a named handler (see :meth:`SchedulerPort.register`);
    ``None`` routes it by ``kind`` (see :meth:`SchedulerPort.subscribe`). :attr:`route` is
    the one key both adapters route on.

    A *recurring* item has a ``recurrence`` with its ``start`` set (use
    :meth:`SchedulerPort.schedule_recurring`, which anchors it at the scheduler's now). Stored,
    its ``due`` is when its next slot is looked for and ``previous`` the last slot applied
    (``None`` before the first tick). Delivered, ``due`` is the slot the tick runs for and
    ``previous`` the slot applied before it; :attr:`slot_key` names the tick.

    Immutable, compared by value (``generation`` and ``previous`` aside) and hashed by
    ``id`` (equal items hash alike, and scheduling an item does not change its hash). A
    scheduler stores a newly built item as it is, setting its
    ``generation`` (so ``schedule(item)`` returns that very object); an item that already
    has a generation (one returned by a scheduler) is copied instead. Do not hand one new
    item object to two schedulers at the same instant from two threads.

    >>> from datetime import UTC, datetime
    >>> ScheduleItem("expire-o-1", ScheduleKind.TIMER, datetime(2026, 1, 1, tzinfo=UTC)).id
    'expire-o-1'
    """

    # The schedule path of every timer (bench/memory_bench.py): the constructor checks with
    # cheap type tests and builds error messages only on failure. Then, its checks done, it
    # fills the fields in as a _Filling (same slots, no frozen __setattr__: seven plain
    # stores, 0.1 us, where seven slot-descriptor calls take 0.25 us and object.__setattr__
    # more) and turns back into a ScheduleItem; nothing else ever sees it unfrozen. Seven
    # slots (88 bytes): the payload, and for a recurring item its recurrence and last slot,
    # share ``_extra`` - None, the payload's JSON, or (payload JSON, recurrence, previous).
    __slots__ = ()
    __match_args__ = ("id", "kind", "due", "flow_id", "payload")

    id: str
    kind: ScheduleKind
    due: datetime
    flow_id: str | None
    generation: int
    handler: str | None
    _extra: str | tuple[str | None, Recurrence, datetime | None] | None

    def __init__(
        self,
        id: str,
        kind: ScheduleKind,
        due: datetime,
        flow_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        generation: int = 0,
        recurrence: Recurrence | None = None,
        previous: datetime | None = None,
        handler: str | None = None,
    ) -> None:
        # Ids: the full check (check_id) unless plainly fine - ASCII (so as many UTF-8
        # bytes as characters, no lone surrogate), within the limit, no NUL.
        if (
            id.__class__ is not str
            or not id
            or len(id) > MAX_ID_BYTES
            or not id.isascii()
            or "\x00" in id
        ):
            check_id(id, "ScheduleItem id")
        if kind.__class__ is not ScheduleKind:
            kind = _kind(id, kind)
        if due.__class__ is not datetime or due.tzinfo is not UTC:
            due = _utc(id, due, "due")
        if flow_id is not None and (
            flow_id.__class__ is not str
            or not flow_id
            or len(flow_id) > MAX_ID_BYTES
            or not flow_id.isascii()
            or "\x00" in flow_id
        ):
            check_id(flow_id, f"ScheduleItem {id!r}: flow_id")
        if generation.__class__ is not int or generation < 0:
            generation = _generation(id, generation)
        if handler is not None:
            handler = _handler(id, handler)
        extra: str | tuple[str | None, Recurrence, datetime | None] | None
        extra = None if payload is None else _encoded(id, payload)
        if recurrence is not None or previous is not None:
            extra = (extra, *_recurring(id, recurrence, previous))
        _set_class(self, _Filling)
        self.id = id
        self.kind = kind
        self.due = due
        self.flow_id = flow_id
        self.generation = generation
        self.handler = handler
        self._extra = extra
        self.__class__ = ScheduleItem

    @property
    def payload(self) -> dict[str, Any] | None:
        """The payload as a new dict (decoded from the JSON the item keeps), or ``None``."""
        encoded = self._payload
        return None if encoded is None else dict(json.loads(encoded))

    @property
    def recurrence(self) -> Recurrence | None:
        """How a recurring item repeats (``None``: a one-shot item)."""
        extra = self._extra
        return extra[1] if isinstance(extra, tuple) else None

    @property
    def previous(self) -> datetime | None:
        """A recurring item's last applied slot (``None`` before its first tick)."""
        extra = self._extra
        return extra[2] if isinstance(extra, tuple) else None

    @property
    def _payload(self) -> str | None:
        extra = self._extra
        return extra[0] if isinstance(extra, tuple) else extra

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
        return _NAME_PREFIX + handler

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
        return self._copy(self.due, self._extra, generation)

    def moved(self, due: datetime, previous: datetime | None = None) -> ScheduleItem:
        """A copy due at ``due`` (and, for a recurring item, with ``previous`` as its last
        applied slot), same generation: how a scheduler moves a redelivered or ticked item."""
        if due.__class__ is not datetime or due.tzinfo is not UTC:
            due = _utc(self.id, due, "due")
        extra = self._extra
        if isinstance(extra, tuple):
            if previous is not None and (
                previous.__class__ is not datetime or previous.tzinfo is not UTC
            ):
                previous = _utc(self.id, previous, "previous")
            extra = (extra[0], extra[1], previous)
        return self._copy(due, extra, self.generation)

    def _copy(
        self,
        due: datetime,
        extra: str | tuple[str | None, Recurrence, datetime | None] | None,
        generation: int,
    ) -> ScheduleItem:
        copy = cast(ScheduleItem, _new_object(_Filling))  # see the construction note
        copy.id = self.id
        copy.kind = self.kind
        copy.due = due
        copy.flow_id = self.flow_id
        copy.generation = generation
        copy.handler = self.handler
        copy._extra = extra
        copy.__class__ = ScheduleItem
        return copy

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not ScheduleItem:
            return NotImplemented
        assert isinstance(other, ScheduleItem)
        return (
            self.id == other.id
            and self.kind == other.kind
            and self.due == other.due
            and self.flow_id == other.flow_id
            and self.recurrence == other.recurrence
            and self.handler == other.handler
            and (self._payload == other._payload or self.payload == other.payload)
        )

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return (
            f"ScheduleItem(id={self.id!r}, kind={self.kind!r}, due={self.due!r}, "
            f"flow_id={self.flow_id!r}, payload={self.payload!r}, "
            f"generation={self.generation!r}, recurrence={self.recurrence!r}, "
            f"previous={self.previous!r}, handler={self.handler!r})"
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The constructor turns the object back into a ScheduleItem, and equality is by
        # exact class: a subclass would silently lose its type.
        raise TypeError("ScheduleItem cannot be subclassed: wrap it or build one instead")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        state = (
            self.id,
            self.kind,
            self.due,
            self.flow_id,
            self.generation,
            self.handler,
            self._extra,
        )
        return (_rebuild, (state,))


_new_object = object.__new__
_set_class = object.__dict__["__class__"].__set__  # past ScheduleItem's frozen __setattr__
_set_generation = _ItemSlots.__dict__["generation"].__set__


# For schedulers: ``set_generation(item, generation)`` gives a newly built item (generation
# 0) the generation it is stored under, in place (see ScheduleItem: no copy on the schedule
# path). The slot's own setter: a function around it would cost a call per schedule().
set_generation = _set_generation


def not_an_item(value: object) -> NoReturn:
    """For schedulers: what ``schedule(value)`` raises when ``value`` is no ScheduleItem (a
    caller's slip that would otherwise end in an ``AttributeError`` deep inside)."""
    raise TypeError(f"schedule() takes a ScheduleItem, got {type(value).__name__}: {value!r:.80}")


def _rebuild(state: tuple[Any, ...]) -> ScheduleItem:
    item = cast(ScheduleItem, _new_object(_Filling))  # see ScheduleItem's construction note
    (
        item.id,
        item.kind,
        item.due,
        item.flow_id,
        item.generation,
        item.handler,
        item._extra,
    ) = state
    item.__class__ = ScheduleItem
    return item


# -- the constructor's slow paths: a value that is not already of the usual type -----------


def _kind(item_id: str, kind: object) -> ScheduleKind:
    try:
        return ScheduleKind(str(kind))
    except ValueError:
        valid = ", ".join(k.value for k in ScheduleKind)
        raise ValueError(
            f"ScheduleItem {item_id!r}: unknown kind {kind!r} (valid: {valid})"
        ) from None


def _utc(item_id: str, value: object, what: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"ScheduleItem {item_id!r}: {what} must be a datetime (got {value!r})")
    return ensure_utc(value, f"ScheduleItem {item_id!r} {what}")


def _generation(item_id: str, generation: object) -> int:
    # Set by schedulers; a whole number >= 0 (0: not yet scheduled).
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise ValueError(
            f"ScheduleItem {item_id!r}: generation must be a whole number >= 0 (got {generation!r})"
        )
    return int(generation)


def _handler(item_id: str, handler: object) -> str:
    # Interned: a service has a few handler names, each carried by many items.
    if isinstance(handler, str) and 0 < len(handler) <= MAX_HANDLER_NAME and handler.isprintable():
        return sys.intern(handler)  # the usual name: no control character (else checked below)
    try:
        return sys.intern(check_handler_name(handler))
    except ValueError as exc:
        raise ValueError(f"ScheduleItem {item_id!r}: {exc}") from None


def _encoded(item_id: str, payload: object) -> str:
    if not isinstance(payload, Mapping):
        raise ValueError(
            f"ScheduleItem {item_id!r}: payload must be a JSON object (dict), "
            f"got {type(payload).__name__}"
        )
    try:
        return _payload_text(payload)
    except ValueError as exc:
        raise ValueError(f"ScheduleItem {item_id!r}: {exc}") from None


def _recurring(
    item_id: str, recurrence: object, previous: datetime | None
) -> tuple[Recurrence, datetime | None]:
    if recurrence is None:
        raise ValueError(f"ScheduleItem {item_id!r}: previous is only for recurring items")
    if not isinstance(recurrence, Recurrence):
        raise ValueError(
            f"ScheduleItem {item_id!r}: recurrence must be a Recurrence (got {recurrence!r})"
        )
    if recurrence.start is None:
        raise ValueError(
            f"ScheduleItem {item_id!r}: the recurrence has no start; use "
            "scheduler.schedule_recurring(...) (slots counted from the scheduler's now) or "
            "give Recurrence.every(..., start=...)"
        )
    if previous is not None:
        previous = _utc(item_id, previous, "previous")
    return recurrence, previous


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


def single_timer_item(
    now: datetime,
    timer_id: str,
    delay: timedelta | datetime,
    handler: str,
    arg: Mapping[str, Any] | None = None,
) -> ScheduleItem:
    """The item ``create_single_timer`` schedules (on either face of the port)."""
    if isinstance(delay, timedelta):
        due = now + delay
    elif isinstance(delay, datetime):
        due = ensure_utc(delay, f"create_single_timer({timer_id!r}) delay")
    else:
        raise TypeError(
            f"create_single_timer({timer_id!r}): delay must be a timedelta or an aware "
            f"datetime (got {delay!r})"
        )
    return ScheduleItem(timer_id, ScheduleKind.TIMER, due, payload=arg, handler=handler)


def recurring_item(
    now: datetime,
    item_id: str,
    recurrence: Recurrence,
    kind: ScheduleKind = ScheduleKind.TIMER,
    flow_id: str | None = None,
    payload: Mapping[str, Any] | None = None,
    handler: str | None = None,
) -> ScheduleItem:
    """The item ``schedule_recurring`` schedules: anchored at ``now`` (unless ``recurrence``
    has a start), due at its first slot."""
    anchored = recurrence.anchored(now)
    assert anchored.start is not None  # anchored() sets it
    first = anchored.next_slot(anchored.start)
    return ScheduleItem(
        item_id, kind, first, flow_id, payload, recurrence=anchored, handler=handler
    )


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
        return self.schedule(single_timer_item(self.now(), timer_id, delay, handler, arg))

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
        return self.schedule(
            recurring_item(self.now(), item_id, recurrence, kind, flow_id, payload, handler)
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
