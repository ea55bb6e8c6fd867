"""Internal: what every adapter's ``timers()`` shares - checking its arguments, the cursor.

``timers(*, id_prefix, flow_id, kind, handler, state, due_from, due_to, limit, after)``
(CONTRACT section 18) lists timers soonest due first, ties by id. :func:`timer_filters`
checks the arguments once for every adapter (a bad one raises ``ValueError`` or
``TypeError`` naming it) and returns a :class:`TimerFilters`. Pages follow each other by
keyset: a page's ``next`` cursor encodes the ``(due, id)`` of its last timer, and the next
page starts strictly after it - so paging stays exact while timers fire, move and vanish
meanwhile, and the last page costs what the first does (no skip).

The cursor is opaque to callers: ``"t1."`` and the URL-safe base64 of the JSON
``[<due in epoch microseconds>, <id>]``, with a third element when the page was full: its
*reach*, where the next page's first read may stop (see :mod:`flowsched.mongo.timer_query`).
:func:`decode_cursor` refuses anything else with a ``ValueError`` naming ``after``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from flowsched.records import ScheduleKind
from flowsched.steering import TIMER_STATES, TimerState

__all__ = [
    "TimerFilterArgs",
    "DEFAULT_LIMIT",
    "ITER_PAGE",
    "MAX_LIMIT",
    "TimerFilters",
    "decode_cursor",
    "encode_cursor",
    "timer_filters",
]

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
"""The largest page ``timers()`` serves (a bigger ``limit`` is refused, naming it)."""

ITER_PAGE = 500
"""The page size ``iter_timers`` reads with (its memory is one page of this many)."""

_PREFIX = "t1."
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TimerFilters:
    """Checked arguments of one ``timers()`` call (``after``: the decoded cursor)."""

    id_prefix: str | None = None
    flow_id: str | None = None
    kind: ScheduleKind | None = None
    handler: str | None = None
    state: TimerState | None = None
    due_from: datetime | None = None
    due_to: datetime | None = None
    limit: int = DEFAULT_LIMIT
    after: tuple[datetime, str] | None = None
    reach: datetime | None = None
    """Where the page after the cursor may first stop reading (a hint: see the cursor)."""

    def following(self, cursor: str) -> TimerFilters:
        """The same filters, for the page after ``cursor``."""
        due, item_id, reach = decode_cursor_reach(cursor)
        return _replace(self, after=(due, item_id), reach=reach)

    def admits(self, item_id: str, flow_id: str | None, kind: str, handler: str | None) -> bool:
        """Whether a timer with these fields passes the id, flow, kind and handler filters
        (the due window and the cursor are checked by :meth:`in_window`)."""
        return (
            (self.id_prefix is None or item_id.startswith(self.id_prefix))
            and (self.flow_id is None or flow_id == self.flow_id)
            and (self.kind is None or kind == self.kind.value)
            and (self.handler is None or handler == self.handler)
        )

    def in_window(self, due: datetime, item_id: str) -> bool:
        """Whether ``(due, item_id)`` is in ``[due_from, due_to)`` and after the cursor."""
        if self.due_from is not None and due < self.due_from:
            return False
        if self.due_to is not None and due >= self.due_to:
            return False
        return self.after is None or (due, item_id) > self.after


def _replace(filters: TimerFilters, **changes: Any) -> TimerFilters:
    from dataclasses import replace

    return replace(filters, **changes)


class TimerFilterArgs(TypedDict, total=False):
    """The keywords of ``timers(...)`` (see :func:`timer_filters` for their defaults)."""

    id_prefix: str | None
    flow_id: str | None
    kind: ScheduleKind | str | None
    handler: str | None
    state: TimerState | None
    due_from: datetime | None
    due_to: datetime | None
    limit: int
    after: str | None


def timer_filters(
    *,
    id_prefix: str | None = None,
    flow_id: str | None = None,
    kind: ScheduleKind | str | None = None,
    handler: str | None = None,
    state: str | None = None,
    due_from: datetime | None = None,
    due_to: datetime | None = None,
    limit: int = DEFAULT_LIMIT,
    after: str | None = None,
) -> TimerFilters:
    """The checked filters; ``TypeError``/``ValueError`` naming the first bad argument."""
    for name, value in (("id_prefix", id_prefix), ("flow_id", flow_id), ("handler", handler)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"timers() {name} must be a string or None, got {value!r}")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"timers() limit must be an integer, got {limit!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"timers() limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    if state is not None and state not in TIMER_STATES:
        valid = ", ".join(TIMER_STATES)
        raise ValueError(f"timers() state {state!r} is not one of {valid}")
    low, high = _aware("due_from", due_from), _aware("due_to", due_to)
    if after is not None and not isinstance(after, str):
        raise TypeError(f"timers() after must be a cursor string (a page's next), got {after!r}")
    filters = TimerFilters(
        id_prefix=id_prefix,
        flow_id=flow_id,
        kind=_kind(kind),
        handler=handler,
        state=state,  # checked against TIMER_STATES above
        due_from=low,
        due_to=high,
        limit=limit,
    )
    return filters if after is None else filters.following(after)


def _aware(name: str, value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"timers() {name} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"timers() {name} must be timezone-aware (e.g. tzinfo=UTC), got {value}")
    return value.astimezone(UTC)


def _kind(value: object) -> ScheduleKind | None:
    if value is None or isinstance(value, ScheduleKind):
        return value
    if isinstance(value, str):
        try:
            return ScheduleKind(value.upper())
        except ValueError:
            pass
        valid = ", ".join(kind.value for kind in ScheduleKind)
        raise ValueError(f"timers() kind {value!r} is not one of {valid}")
    raise TypeError(f"timers() kind must be a ScheduleKind or its name, got {value!r}")


def encode_cursor(due: datetime, item_id: str, reach: datetime | None = None) -> str:
    """The cursor of the page that follows the timer ``(due, item_id)`` (and ``reach``)."""
    parts: list[Any] = [_micros(due), item_id]
    if reach is not None:
        parts.append(_micros(reach))
    text = json.dumps(parts, separators=(",", ":"), ensure_ascii=False)
    return _PREFIX + base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def _micros(when: datetime) -> int:
    return (when.astimezone(UTC) - _EPOCH) // timedelta(microseconds=1)


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """``(due, id)`` of a cursor made by :func:`encode_cursor`; ``ValueError`` naming
    ``after`` for anything else."""
    due, item_id, _ = decode_cursor_reach(cursor)
    return due, item_id


def decode_cursor_reach(cursor: str) -> tuple[datetime, str, datetime | None]:
    """``(due, id, reach)`` of a cursor (``reach`` ``None`` when it has none)."""
    bad = ValueError(f"timers() after {cursor!r:.80} is not a cursor from a page's next")
    if not isinstance(cursor, str) or not cursor.startswith(_PREFIX):
        raise bad
    body = cursor[len(_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        parts = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise bad from None
    if not isinstance(parts, list) or len(parts) not in (2, 3):
        raise bad
    item_id, numbers = parts[1], [parts[0], *parts[2:]]
    if not isinstance(item_id, str) or not all(_is_int(n) for n in numbers):
        raise bad
    try:
        times = [_EPOCH + timedelta(microseconds=n) for n in numbers]
    except OverflowError:
        raise bad from None
    return times[0], item_id, times[1] if len(times) == 2 else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
