"""Internal: the records a scheduler stores and hands out - ``ScheduleItem``, ``ScheduleKind``
and ``DeadLetter`` (the interface they travel through is :mod:`flowsched.port`).

Values only: immutable, compared by value, JSON payloads, no I/O. Import them as
``flowsched.ScheduleItem``, ``flowsched.ScheduleKind`` and ``flowsched.DeadLetter``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NoReturn, cast, final

from flowsched.clock import ensure_utc
from flowsched.limits import (
    MAX_HANDLER_NAME,
    MAX_ID_BYTES,
    check_handler_name,
    check_id,
    payload_text,
)
from flowsched.recurrence import Recurrence
from flowsched.routes import KIND_PREFIX, NAME_PREFIX

__all__ = [
    "DeadLetter",
    "ScheduleItem",
    "ScheduleKind",
    "log_fields",
    "not_an_item",
    "set_generation",
]


class ScheduleKind(StrEnum):
    """What a scheduled item is for; handlers subscribe per kind."""

    ACTION_TIMEOUT = "ACTION_TIMEOUT"
    ACTION_RETRY = "ACTION_RETRY"
    PROCESSING_TIMEOUT = "PROCESSING_TIMEOUT"
    TIMER = "TIMER"


_NAME_PREFIX = NAME_PREFIX
_KIND_ROUTES: dict[str, str] = {kind: KIND_PREFIX + kind.value for kind in ScheduleKind}


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
    (``None`` before the first tick), ``runs`` how many slots it has applied (what
    ``max_runs`` counts). Delivered, ``due`` is the slot the tick runs for, ``previous`` the
    slot applied before it and ``runs`` the runs before this one; :attr:`slot_key` names the
    tick.

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
    # share ``_extra`` - None, the payload's JSON, or (payload JSON, recurrence, previous,
    # runs).
    __slots__ = ()
    __match_args__ = ("id", "kind", "due", "flow_id", "payload")

    id: str
    kind: ScheduleKind
    due: datetime
    flow_id: str | None
    generation: int
    handler: str | None
    _extra: str | tuple[str | None, Recurrence, datetime | None, int] | None

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
        runs: int = 0,
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
        extra: str | tuple[str | None, Recurrence, datetime | None, int] | None
        extra = None if payload is None else _encoded(id, payload)
        if recurrence is not None or previous is not None or runs:
            extra = (extra, *_recurring(id, recurrence, previous, runs))
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
    def runs(self) -> int:
        """A recurring item's runs so far: the slots it has applied (0 for a one-shot item)."""
        extra = self._extra
        return extra[3] if isinstance(extra, tuple) else 0

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

    def moved(
        self, due: datetime, previous: datetime | None = None, runs: int | None = None
    ) -> ScheduleItem:
        """A copy due at ``due`` (and, for a recurring item, with ``previous`` as its last
        applied slot and ``runs`` its runs so far, unchanged if ``None``), same generation:
        how a scheduler moves a redelivered or ticked item."""
        if due.__class__ is not datetime or due.tzinfo is not UTC:
            due = _utc(self.id, due, "due")
        extra = self._extra
        if isinstance(extra, tuple):
            if previous is not None and (
                previous.__class__ is not datetime or previous.tzinfo is not UTC
            ):
                previous = _utc(self.id, previous, "previous")
            extra = (extra[0], extra[1], previous, extra[3] if runs is None else runs)
        return self._copy(due, extra, self.generation)

    def _copy(
        self,
        due: datetime,
        extra: str | tuple[str | None, Recurrence, datetime | None, int] | None,
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
    item: ScheduleItem = _new_object(_Filling)  # type: ignore[assignment]  # (no cast call)
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


item_of_checked = _rebuild  # a store's one-shot item of fields it checked as __init__ does


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
        return payload_text(payload)
    except ValueError as exc:
        raise ValueError(f"ScheduleItem {item_id!r}: {exc}") from None


def _recurring(
    item_id: str, recurrence: object, previous: datetime | None, runs: object
) -> tuple[Recurrence, datetime | None, int]:
    if recurrence is None:
        raise ValueError(
            f"ScheduleItem {item_id!r}: previous and runs are only for recurring items"
        )
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
    if isinstance(recurrence.calendar, str):
        raise ValueError(
            f"ScheduleItem {item_id!r}: the recurrence names calendar {recurrence.calendar!r}; "
            "schedule it with scheduler.schedule_recurring(...), which finds it in the "
            "scheduler's calendars (ipf-scheduler.calendars), or pass a Calendar"
        )
    if previous is not None:
        previous = _utc(item_id, previous, "previous")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 0:
        raise ValueError(
            f"ScheduleItem {item_id!r}: runs must be a whole number >= 0 (got {runs!r})"
        )
    return recurrence, previous, runs


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An item that failed ``attempts`` times and was set aside (``max_attempts`` reached)."""

    item: ScheduleItem
    attempts: int
    error: str
    dead_at: datetime


def log_fields(item: ScheduleItem) -> dict[str, str]:
    """The ``extra`` of a log record about ``item`` (structured logging: its id and kind)."""
    return {"item_id": item.id, "kind": item.kind.value}
