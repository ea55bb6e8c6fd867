"""Internal: rows of the timers tables, to and from the records the store interface speaks.

Writing: :func:`item_params` turns an item into the statement's parameters; what PostgreSQL
cannot keep exactly (an integer beyond 64 bits, a NUL character) was refused when the item
was built (:mod:`flowsched.limits`), as on every adapter.

Reading: every value a row holds is checked for its type before it becomes a record (nothing
the database returns travels on as ``Any``); a row that is not a valid item raises
:class:`~flowsched.errors.MalformedDocument` with the reason, which the claim turns into a
quarantine.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from flowsched.errors import MalformedDocument
from flowsched.limits import payload_text
from flowsched.postgres.plans import Row
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.steering import ATTEMPT_OUTCOMES, TIMER_STATES, Attempt, TimerInfo

__all__ = [
    "attempt_from_row",
    "dead_letter_from_row",
    "item_from_row",
    "item_params",
    "timer_info_from_row",
    "utc",
]


def item_params(item: ScheduleItem) -> dict[str, Any]:
    """The ``put`` statement's parameters for ``item`` (``ValueError`` if its payload cannot
    be stored exactly)."""
    # The payload was checked when the item was built (flowsched.limits: what neither
    # MongoDB nor PostgreSQL keeps exactly - beyond 64 bits, a NUL - is refused there).
    payload = item.payload
    text = None if payload is None else payload_text(payload)
    recurrence = item.recurrence
    return {
        "id": item.id,
        "kind": item.kind.value,
        "handler": item.handler,
        "route": item.route,
        "flow_id": item.flow_id,
        "due": item.due,
        "payload": text,
        "recurrence": None if recurrence is None else json.dumps(recurrence.to_json()),
        "previous": item.previous,
        "runs": item.runs,
    }


def utc(value: object, what: str, item_id: object = "?") -> datetime:
    """``value`` as an aware UTC datetime; :class:`MalformedDocument` if it is none."""
    if type(value) is datetime and value.tzinfo is UTC:
        return value  # what a session in UTC sends (a claim's batch decodes many)
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise MalformedDocument(item_id, f"{what} must be a timestamptz, got {value!r}")
    return value.astimezone(UTC)


def utc_or_none(value: object, what: str, item_id: object = "?") -> datetime | None:
    """:func:`utc` of ``value``, or ``None`` for NULL."""
    return None if value is None else utc(value, what, item_id)


def text(value: object, what: str, item_id: object = "?") -> str:
    """``value`` if it is a string; :class:`MalformedDocument` otherwise."""
    if not isinstance(value, str):
        raise MalformedDocument(item_id, f"{what} must be text, got {value!r}")
    return value


def text_or_none(value: object, what: str, item_id: object = "?") -> str | None:
    """:func:`text` of ``value``, or ``None`` for NULL."""
    return None if value is None else text(value, what, item_id)


def whole(value: object, what: str, item_id: object = "?") -> int:
    """``value`` if it is an int (not a bool); :class:`MalformedDocument` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedDocument(item_id, f"{what} must be an integer, got {value!r}")
    return value


def _recurrence(value: object, item_id: object) -> Recurrence | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedDocument(item_id, f"recurrence must be an object, got {value!r}")
    try:
        recurrence = Recurrence.from_json(value)
    except (ValueError, TypeError, KeyError) as exc:
        raise MalformedDocument(item_id, f"recurrence: {exc}") from None
    if recurrence.start is None:
        raise MalformedDocument(item_id, f"recurrence has no start: {value!r}")
    return recurrence


def _payload(value: object, item_id: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedDocument(item_id, f"payload must be an object, got {value!r}")
    return value


_KINDS = {kind.value: kind for kind in ScheduleKind}


def item_from_row(row: Row) -> ScheduleItem:
    """``(id, generation, kind, handler, flow_id, due, payload, recurrence, previous, runs,
    ...)`` as a :class:`ScheduleItem`; :class:`MalformedDocument` naming what is wrong."""
    # The usual row of a claim (a one-shot timer, values of the expected types, due in UTC
    # as the server's session sends it) is built without the checks' function calls: the
    # claim decodes a whole batch on the node's one loop thread.
    raw_id, generation, kind, handler, flow_id, due, payload, recurrence = row[:8]
    if (
        recurrence is None
        and type(raw_id) is str
        and type(generation) is int
        and type(due) is datetime
        and due.tzinfo is UTC
        and (payload is None or type(payload) is dict)
        and (handler is None or type(handler) is str)
        and (flow_id is None or type(flow_id) is str)
        and type(kind) is str
        and kind in _KINDS
    ):
        try:
            return ScheduleItem(
                raw_id, _KINDS[kind], due, flow_id, payload, generation, handler=handler
            )
        except (ValueError, TypeError):
            pass  # the checked path below names the problem
    return _checked_item(row)


def _checked_item(row: Row) -> ScheduleItem:
    raw_id = row[0]
    item_id = text(raw_id, "id", raw_id)
    try:
        kind = ScheduleKind(text(row[2], "kind", item_id))
    except ValueError:
        raise MalformedDocument(item_id, f"unknown kind {row[2]!r}") from None
    recurrence = _recurrence(row[7], item_id)
    previous = utc_or_none(row[8], "previous", item_id)
    runs = whole(row[9], "runs", item_id) if recurrence is not None else 0
    try:
        return ScheduleItem(
            item_id,
            kind,
            utc(row[5], "due", item_id),
            flow_id=text_or_none(row[4], "flow_id", item_id),
            payload=_payload(row[6], item_id),
            generation=whole(row[1], "generation", item_id),
            recurrence=recurrence,
            previous=previous if recurrence is not None else None,
            handler=text_or_none(row[3], "handler", item_id),
            runs=runs,
        )
    except (ValueError, TypeError) as exc:
        if isinstance(exc, MalformedDocument):
            raise
        raise MalformedDocument(item_id, str(exc)) from None


def dead_letter_from_row(row: Row) -> DeadLetter:
    """A row of ``dead_letters`` (item columns, then attempts, error, dead_at)."""
    item = item_from_row(row)
    return DeadLetter(
        item,
        whole(row[10], "attempts", item.id),
        text(row[11], "error", item.id),
        utc(row[12], "dead_at", item.id),
    )


def _payload_size(payload: dict[str, Any] | None) -> int:
    if payload is None:
        return 0
    return len(payload_text(payload).encode("utf-8"))


def timer_info_from_row(row: Row) -> TimerInfo:
    """A row of the ``timers`` statement as a :class:`TimerInfo`."""
    item_id = text(row[0], "id", row[0])
    state = text(row[5], "state", item_id)
    if state not in TIMER_STATES:
        raise MalformedDocument(item_id, f"unknown state {state!r}")
    try:
        kind = ScheduleKind(text(row[1], "kind", item_id))
    except ValueError:
        raise MalformedDocument(item_id, f"unknown kind {row[1]!r}") from None
    payload = _payload(row[11], item_id)
    return TimerInfo(
        id=item_id,
        kind=kind,
        handler=text_or_none(row[2], "handler", item_id),
        flow_id=text_or_none(row[3], "flow_id", item_id),
        due=utc(row[4], "due", item_id),
        state=state,  # checked against TIMER_STATES above
        attempts=whole(row[6], "attempts", item_id),
        last_error=text_or_none(row[7], "last_error", item_id),
        node=text_or_none(row[8], "owner", item_id),
        lease_until=utc_or_none(row[9], "lease_until", item_id),
        recurrence=_recurrence(row[10], item_id),
        payload_size=_payload_size(payload),
        payload=payload,
    )


def attempt_from_row(row: Row, item_id: str) -> Attempt:
    """A row of the ``history`` statement as an :class:`Attempt`."""
    outcome = text_or_none(row[3], "outcome", item_id)
    if outcome is not None and outcome not in ATTEMPT_OUTCOMES:
        raise MalformedDocument(item_id, f"unknown attempt outcome {outcome!r}")
    return Attempt(
        node=text(row[0], "node", item_id),
        started=utc(row[1], "started", item_id),
        ended=utc_or_none(row[2], "ended", item_id),
        outcome=outcome,  # checked against ATTEMPT_OUTCOMES above
        error_type=text_or_none(row[4], "error_type", item_id),
        error_message=text_or_none(row[5], "error_message", item_id),
        traceback=text_or_none(row[6], "traceback", item_id),
        generation=whole(row[7], "generation", item_id),
        attempt=whole(row[8], "attempt", item_id),
    )
