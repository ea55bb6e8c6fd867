"""Internal: the rows of a claim as :class:`~flowsched.store.Claim` records, soonest due
first - the firing path's decoding, one row per timer fired.

A claim statement (``claim_due``, ``claim_started``) returns ``(id, generation, kind,
handler, flow_id, due, payload, recurrence, previous, runs, attempts, lease_until, route,
claim_token, lapses)`` (``lapses``: the claim's :attr:`~flowsched.store.Claim.lapsed`). The
usual row - a one-shot item whose values are all of the expected types, its due time and
lease in UTC as the server's session sends them - is checked here once, by the rules of
:class:`~flowsched.ScheduleItem`'s constructor, and built without checking again. Any
other row goes the checked way (:func:`~flowsched.postgres.rows.item_from_row`), which
builds it or names what is wrong. Either way the records are the same, and a row that is
not a valid item is returned among the bad ones with the reason (the claim quarantines it).
"""

from __future__ import annotations

import sys
from dataclasses import fields
from datetime import UTC, datetime

from flowsched.errors import MalformedDocument
from flowsched.limits import MAX_HANDLER_NAME, MAX_ID_BYTES, payload_text
from flowsched.postgres.plans import Row
from flowsched.postgres.rows import item_from_row, text, utc, whole
from flowsched.records import ScheduleKind, item_of_checked
from flowsched.store.records import Claim

__all__ = ["checked_claim", "claims_from_rows"]

_KINDS = {kind.value: kind for kind in ScheduleKind}

# A Claim built field by field (its slots' own setters): a frozen dataclass's __init__
# costs twice as much, once per timer fired. Its fields, in order, are checked here.
_CLAIM_FIELDS = ("item", "attempt", "owner", "lease_until", "token", "lapsed")
assert tuple(f.name for f in fields(Claim)) == _CLAIM_FIELDS, "Claim's fields changed"
_new = object.__new__
_set_item, _set_attempt, _set_owner, _set_lease, _set_token, _set_lapsed = (
    Claim.__dict__[name].__set__ for name in _CLAIM_FIELDS
)


def claims_from_rows(rows: list[Row], owner: str) -> tuple[list[Claim], dict[str, str]]:
    """The claims of ``owner`` in ``rows``, ordered by due time, then generation (then as
    the rows came); and the rows that are not valid items, as ``{id: reason}``."""
    keyed: list[tuple[datetime, int, int, Claim]] = []
    bad: dict[str, str] = {}
    intern = sys.intern
    for index, row in enumerate(rows):
        raw_id, generation, kind, handler, flow_id, due, payload, recurrence = row[:8]
        attempts, lease_until, _route, token, lapses = row[10:15]
        if (
            recurrence is None
            and type(raw_id) is str
            and 0 < len(raw_id) <= MAX_ID_BYTES
            and raw_id.isascii()
            and "\x00" not in raw_id
            and type(generation) is int
            and generation >= 0
            and type(kind) is str
            and kind in _KINDS
            and type(due) is datetime
            and due.tzinfo is UTC
            and (
                flow_id is None
                or (
                    type(flow_id) is str
                    and 0 < len(flow_id) <= MAX_ID_BYTES
                    and flow_id.isascii()
                    and "\x00" not in flow_id
                )
            )
            and (
                handler is None
                or (
                    type(handler) is str
                    and 0 < len(handler) <= MAX_HANDLER_NAME
                    and handler.isprintable()
                )
            )
            and (payload is None or type(payload) is dict)
            and type(attempts) is int
            and type(lease_until) is datetime
            and lease_until.tzinfo is UTC
            and type(token) is str
            and type(lapses) is int
        ):
            try:
                extra = None if payload is None else payload_text(payload)
            except ValueError:
                pass  # the checked way names the problem
            else:
                if handler is not None:
                    handler = intern(handler)
                item = item_of_checked(
                    (raw_id, _KINDS[kind], due, flow_id, generation, handler, extra)
                )
                claim = _new(Claim)
                _set_item(claim, item)
                _set_attempt(claim, attempts)
                _set_owner(claim, owner)
                _set_lease(claim, lease_until)
                _set_token(claim, token)
                _set_lapsed(claim, lapses)
                keyed.append((due, generation, index, claim))
                continue
        try:
            claim = checked_claim(row, owner)
        except MalformedDocument as exc:
            bad[str(raw_id)] = exc.reason
            continue
        keyed.append((claim.item.due, claim.item.generation, index, claim))
    keyed.sort()  # by due, generation, index: unique, so claims are never compared
    return [entry[3] for entry in keyed], bad


def checked_claim(row: Row, owner: str) -> Claim:
    """The claim of one claim row, every field checked the slow way (the item as
    :func:`~flowsched.postgres.rows.item_from_row` builds it); :class:`MalformedDocument`
    naming what is wrong."""
    item = item_from_row(row)
    return Claim(
        item,
        whole(row[10], "attempts", item.id),
        owner,
        utc(row[11], "lease_until", item.id),
        text(row[13], "claim_token", item.id),
        whole(row[14], "lapses", item.id),
    )
