"""Internal: ``timers()``, ``pause`` and ``resume`` on a MongoDB collection (procedures).

Both Mongo faces run these procedures (:mod:`flowsched.mongo.commands`), and so does
``flowsched timers list``: one query, whoever asks.

**The query.** A page is one ``find`` sorted by ``(due, _id)`` with ``limit + 1`` (the extra
document only says whether another page follows), served by the index ``due_id`` on
``(due, _id)`` (:meth:`~flowsched.mongo.store.TimerStore.ensure_indexes`). The page after a
cursor ``(d, i)`` reads ``due >= d`` with ``limit + 2`` and drops what is not after the
cursor (its own timer, if still stored); only when more timers than that share the instant
``d`` does it read the two exact ranges, ``due == d and _id > i`` then ``due > d``. Every
read is one plain range of the index starting at the cursor, so the last page costs what the
first does (no ``skip``, and no ``$or``, which the wire server answers with a full scan).
The cursor also carries a *reach*: past ``d`` by twice the span of due times on the page it
ends, about two pages ahead. The next page reads up to the reach first, and past it only if
that did not fill the page - so a server that reads a whole index range before applying the
limit (the wire server does: a page from the start of 100,000 timers took 5.8 s, a bounded
one 0.2 s) pays for about two pages, not for every timer after the cursor. MongoDB stops at
the limit either way; there the reach changes nothing but the range's end.

``state`` selects on the document: ``"paused"`` = ``paused: true``; ``"claimed"`` = a claim
is stored (a node is delivering it; if ``lease_until`` has passed, its node died or was cut
off and another node claims it again); ``"scheduled"`` = neither. ``state="dead"`` lists
the dead letters of ``<collection>_dead`` instead (same filters, same order, index
``due_id`` there too); without ``state`` dead letters are not listed (they fire nothing:
``dead_letters()``). A malformed document is left out of ``TimerInfo`` pages (and logged);
the CLI, which reads the documents, shows it with its reason.

**Pause.** A paused document's ``route`` is ``"paused:" + <its route>`` and it has
``paused: true``. Every claim query names the routes its node serves (index ``route, bucket,
ready_at``), so no node's claim ever reads a paused document, and the claiming update
re-checks the route, so a claim racing a pause does not take it. Why the route and not
``ready_at``: the writes a running delivery makes (lease renewals, the settle of a failure or
of a recurring tick) set ``ready_at`` but never the route, so pausing a claimed item needs no
change to them; and a document without a date ``ready_at`` is what the poison audit moves
aside (:class:`~flowsched.mongo.quarantine.Audit`). A delivery running when its item is
paused may finish; its outcome is written as usual (a one-shot item that succeeds is
removed, a failure moves ``due``, a tick moves to the next slot), and the item stays paused.
Scheduling again under the id replaces the document: the new item is not paused.

**Resume** puts the route back and removes ``paused``. An unclaimed item due later keeps its
due time; one whose due time passed is due now (a one-shot item) or at its first slot after
now (a recurring one: the missed slots are not replayed). A claimed item keeps its claim and
times: the delivery running settles it as usual (if its node died, the claim's lease end is
when another node takes it).

Every write is conditioned on what was read (generation, route, claim token): a change in
between (a claim, a settle, a replace) makes it match nothing, and the procedure reads again.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import ASCENDING

from flowsched.errors import ConcurrentUpdateError
from flowsched.limits import payload_text
from flowsched.mongo.commands import Call, Find, Steps
from flowsched.mongo.documents import (
    PAUSED_PREFIX,
    MalformedDocument,
    bson_utc,
    bson_utc_or_none,
    dead_letter_from_document,
    stored_item,
    truncate_ms,
)
from flowsched.mongo.inspection import claim_of
from flowsched.mongo.store import DUE_INDEX, DUE_INDEX_KEYS, Doc, TimerStore
from flowsched.steering import TimerInfo, TimerPage, TimerState
from flowsched.steering_query import TimerFilters, encode_cursor
from flowsched.store.info import dead_info

__all__ = [
    "ClaimReach",
    "BY_DUE",
    "DUE_INDEX",
    "DUE_INDEX_KEYS",
    "document_page_steps",
    "oldest_steps",
    "pause_steps",
    "resume_steps",
    "timer_info",
    "timer_query",
    "timers_steps",
]

log = logging.getLogger("flowsched.mongo")

BY_DUE = (("due", ASCENDING), ("_id", ASCENDING))
_TRIES = 5
"""Reads and conditional writes a pause or resume makes before it gives up (each lost race
is a claim or settle that happened in between: rare, and over in milliseconds)."""


def oldest_steps(
    routes: Sequence[str],
    buckets: Sequence[int],
    ready: Mapping[str, Any] | None,
    limit: int,
    projection: Mapping[str, Any] | None = None,
) -> Steps[list[dict[str, Any]]]:
    """The first ``limit`` documents of ``routes`` in ``buckets`` (``ready_at`` matching
    ``ready``, if given), oldest ``ready_at`` first: one ``find`` per route and bucket, each
    an equality range of the claim index ``(route, bucket, ready_at)``, merged - never a
    collection scan (the wire server answers an ``$in`` or ``$or`` on the route with one,
    reading every item of every route). A ``ready_at`` that is not a date sorts first: such
    a document is met (and quarantined), not skipped."""
    ranges: list[list[dict[str, Any]]] = []
    for route in routes:
        for bucket in buckets:
            query: dict[str, Any] = {"route": route, "bucket": bucket}
            if ready is not None:
                query["ready_at"] = ready
            ranges.append((yield Find("items", query, projection, _BY_READY, limit)))
    if len(ranges) == 1:
        return ranges[0]
    return list(itertools.islice(heapq.merge(*ranges, key=_ready_key), limit))


class ClaimReach:
    """Where a node's next claim query stops: at the horizon, except just after a full
    batch; then at a *reach* past that batch's last ``ready_at``, as far as twice the next
    claim's ``limit`` at the pace that batch fell due (about two batches), and only if that
    range holds fewer than ``limit`` does a second query read on, from the reach to the
    horizon. Every document older than the reach is in range, so none is skipped. Why: a
    server that reads a whole index range before applying the limit (the wire server does:
    a claim at the head of a 2,000-timer backlog took 114 ms there, 13 ms with the reach)
    would pay for the whole backlog on every claim of a burst. The pace, not the span, sets
    the reach: after a small claim (8 for a wave of workers) a span's reach held too few for
    the next batch of 100, whose second query then read the backlog (56 ms a claim). MongoDB
    stops at the limit either way."""

    __slots__ = ("at", "gaps", "span")

    def __init__(self) -> None:
        self.at: datetime | None = None
        self.span, self.gaps = timedelta(0), 1  # the last full batch's: its pace, span / gaps

    def steps(
        self, routes: Sequence[str], buckets: Sequence[int], horizon: datetime, limit: int
    ) -> Steps[list[dict[str, Any]]]:
        """The first ``limit`` documents of ``routes`` in ``buckets`` ready by ``horizon``,
        oldest first (:func:`oldest_steps`)."""
        last, self.at = self.at, None
        try:
            reach = None if last is None else last + self.span * (2 * limit) / self.gaps
        except OverflowError:  # a pace of years: the horizon
            reach = None
        if reach is None or reach >= horizon:
            found = yield from oldest_steps(routes, buckets, {"$lte": horizon}, limit)
        else:
            found = yield from oldest_steps(routes, buckets, {"$lte": reach}, limit)
            if len(found) < limit:
                later = {"$gt": reach, "$lte": horizon}
                found += yield from oldest_steps(routes, buckets, later, limit - len(found))
        if len(found) >= limit >= 2:
            first, end = _ready_key(found[0]), _ready_key(found[-1])
            if end > first:
                self.at, self.span, self.gaps = end, end - first, len(found) - 1
        return found


def _ready_key(doc: Doc) -> datetime:
    ready = doc.get("ready_at")
    return bson_utc(ready) if isinstance(ready, datetime) else datetime.min.replace(tzinfo=UTC)


_BY_READY = (("ready_at", ASCENDING),)


def timer_query(filters: TimerFilters) -> dict[str, Any]:
    """The ``find`` filter of ``filters`` without the cursor (what every page shares)."""
    query: dict[str, Any] = {}
    if filters.id_prefix is not None:
        query["_id"] = {"$regex": "^" + re.escape(filters.id_prefix)}
    if filters.flow_id is not None:
        query["flow_id"] = filters.flow_id
    if filters.kind is not None:
        query["kind"] = filters.kind.value
    if filters.handler is not None:
        query["handler"] = filters.handler
    query.update(_state_query(filters.state))
    due: dict[str, Any] = {}
    if filters.due_from is not None:
        due["$gte"] = filters.due_from
    if filters.due_to is not None:
        due["$lt"] = filters.due_to
    if due:
        query["due"] = due
    return query


def _state_query(state: TimerState | None) -> dict[str, Any]:
    if state == "paused":
        return {"paused": True}
    if state == "claimed":
        return {"paused": {"$ne": True}, "claim": {"$ne": None}}
    if state == "scheduled":
        return {"paused": {"$ne": True}, "claim": None}
    return {}  # any live state; "dead" reads the other collection


def ties_query(filters: TimerFilters, at: datetime, item_id: str) -> dict[str, Any] | None:
    """The timers due at the cursor's ``at`` with an id after its ``item_id`` (one range of
    ``due_id``: ``due`` equal, ``_id`` above); ``None`` if ``at`` is outside the window."""
    if filters.due_from is not None and at < filters.due_from:
        return None
    if filters.due_to is not None and at >= filters.due_to:
        return None
    query = timer_query(filters)
    query["due"] = at
    query["_id"] = {**query.get("_id", {}), "$gt": item_id}
    return query


def later_query(
    filters: TimerFilters,
    at: datetime,
    *,
    inclusive: bool = False,
    upto: datetime | None = None,
) -> dict[str, Any]:
    """The timers due after the cursor's ``at`` (at or after it: ``inclusive``), up to
    ``upto`` if given: one range of ``due_id`` from ``at``."""
    query = timer_query(filters)
    due = dict(query.get("due", {}))
    if "$gte" not in due or due["$gte"] <= at:
        due.pop("$gte", None)
        due["$gte" if inclusive else "$gt"] = at
    if upto is not None:
        due["$lte"] = upto
    query["due"] = due
    return query


def _not_after(doc: Doc, at: datetime, item_id: str) -> bool:
    """Whether ``doc`` is at or before the cursor ``(at, item_id)``."""
    return bson_utc_or_none(doc.get("due")) == at and str(doc.get("_id")) <= item_id


def document_page_steps(
    filters: TimerFilters, extra: Mapping[str, Any] | None = None
) -> Steps[tuple[list[Doc], str | None]]:
    """The documents of one page and the cursor of the next (``None``: last page).

    A page after a cursor ``(at, id)`` is read from plain index ranges, never an ``$or``
    (see the module docstring). ``extra``: more conditions ANDed in (the CLI's
    ``--overdue``)."""
    role = "dead" if filters.state == "dead" else "items"
    wanted = filters.limit + 1  # one more: whether another page follows

    def read(query: dict[str, Any], limit: int) -> Find:
        where = {"$and": [query, dict(extra)]} if extra else query
        return Find(role, where, sort=BY_DUE, limit=limit)

    if filters.after is None:
        found: list[Doc] = yield read(timer_query(filters), wanted)
    else:
        # Usually one range from the cursor's instant to its reach, its own timer (if still
        # there) and any tie before it dropped here; many timers at that instant: the two
        # exact ranges. Past the reach only if that did not fill the page.
        at, item_id = filters.after
        reach = filters.reach if filters.reach is not None and filters.reach > at else None
        read_from = yield read(later_query(filters, at, inclusive=True, upto=reach), wanted + 1)
        found = [doc for doc in read_from if not _not_after(doc, at, item_id)]
        if len(found) < wanted and len(read_from) == wanted + 1:
            ties = ties_query(filters, at, item_id)
            found = [] if ties is None else (yield read(ties, wanted))
            if len(found) < wanted:
                found += yield read(later_query(filters, at, upto=reach), wanted - len(found))
        if len(found) < wanted and reach is not None:
            found += yield read(later_query(filters, reach), wanted - len(found))
    page = found[: filters.limit]
    if len(found) <= filters.limit or not page:
        return page, None
    return page, _cursor(page)


def _cursor(page: list[Doc]) -> str:
    """The cursor after ``page``: its last document with a date ``due`` (a malformed one
    without is skipped by every later page anyway: ``due >= d`` matches dates only)."""
    dues = [(due, doc) for doc in page if (due := bson_utc_or_none(doc.get("due"))) is not None]
    if not dues:
        return encode_cursor(datetime.min.replace(tzinfo=UTC), "")
    (first, _), (last, doc) = dues[0], dues[-1]
    return encode_cursor(last, str(doc.get("_id")), _reach(first, last))


def _reach(first: datetime, last: datetime) -> datetime | None:
    """Where the next page's first read stops: past ``last`` by twice this (full) page's
    span, so about two pages at the pace the timers fall due; ``None`` (no end) when the
    page's timers share one instant (no pace) or the reach would pass the year 9999."""
    if last <= first:
        return None
    try:
        return last + 2 * (last - first)
    except OverflowError:
        return None


def timers_steps(filters: TimerFilters) -> Steps[TimerPage]:
    """One page of :class:`TimerInfo` (malformed documents logged and left out)."""
    documents, cursor = yield from document_page_steps(filters)
    dead = filters.state == "dead"
    infos = []
    for doc in documents:
        try:
            infos.append(_dead_info(doc) if dead else timer_info(doc))
        except MalformedDocument as exc:
            log.error("timers(): %s", exc)
    return TimerPage(infos, cursor)


def timer_info(doc: Doc) -> TimerInfo:
    """An item document as a :class:`TimerInfo`; :class:`MalformedDocument` if it is not one."""
    stored = stored_item(doc)
    item = stored.item
    claim = claim_of(doc)
    state: TimerState = "scheduled"
    if is_paused(doc):
        state = "paused"
    elif claim is not None:
        state = "claimed"
    error = doc.get("last_error")
    payload = item.payload
    return TimerInfo(
        id=item.id,
        kind=item.kind,
        handler=item.handler,
        flow_id=item.flow_id,
        due=item.due,
        state=state,
        attempts=stored.attempts,
        last_error=error if isinstance(error, str) else None,
        node=None if claim is None else claim.owner,
        lease_until=None if claim is None else claim.lease_until,
        recurrence=item.recurrence,
        payload_size=_size(payload),
        payload=payload,
    )


def _dead_info(doc: Doc) -> TimerInfo:
    return dead_info(dead_letter_from_document(doc))


def _size(payload: Mapping[str, Any] | None) -> int:
    return 0 if payload is None else len(payload_text(payload).encode("utf-8"))


def is_paused(doc: Doc) -> bool:
    """Whether ``doc`` is paused (see the module docstring)."""
    route = doc.get("route")
    return doc.get("paused") is True or (isinstance(route, str) and route.startswith(PAUSED_PREFIX))


# -- pause and resume -------------------------------------------------------------------------


def pause_steps(store: TimerStore, item_id: str) -> Steps[bool]:
    """Pause ``item_id``: ``False`` if it is not stored; ``True`` once it is paused (also
    when it already was). :class:`MalformedDocument` for a document that is not an item."""
    for _ in range(_TRIES):
        doc = yield from store.find_steps(item_id)
        if doc is None:
            return False
        if is_paused(doc):
            return True
        route = stored_item(doc).item.route
        where = {**store.key(item_id), "generation": doc["generation"], "route": doc.get("route")}
        change = {"$set": {"route": PAUSED_PREFIX + route, "paused": True}}
        if (yield Call("items", "update_one", (where, change))).matched_count:
            return True
    raise _busy("pause", item_id)


def resume_steps(store: TimerStore, item_id: str, now: datetime) -> Steps[bool]:
    """Resume ``item_id`` at ``now`` (see the module docstring): ``False`` if it is not
    stored; ``True`` once it is not paused (also when it was not)."""
    for _ in range(_TRIES):
        doc = yield from store.find_steps(item_id)
        if doc is None:
            return False
        if not is_paused(doc):
            return True
        item = stored_item(doc).item
        where: dict[str, Any] = {
            **store.key(item_id),
            "generation": doc["generation"],
            "route": doc.get("route"),
        }
        changes: dict[str, Any] = {"route": item.route}
        claim = claim_of(doc)
        if claim is None:
            where["claim"] = None
            due = _resumed_due(item.due, item.recurrence, truncate_ms(now))
            changes.update(due=due, ready_at=due)
        else:
            where["claim.token"] = doc["claim"].get("token")
        change = {"$set": changes, "$unset": {"paused": ""}}
        if (yield Call("items", "update_one", (where, change))).matched_count:
            return True
    raise _busy("resume", item_id)


def _resumed_due(due: datetime, recurrence: Any, now: datetime) -> datetime:
    if due > now:
        return due
    if recurrence is None:
        return now
    return truncate_ms(recurrence.next_slot(now))


def _busy(verb: str, item_id: str) -> ConcurrentUpdateError:
    return ConcurrentUpdateError(
        f"{verb}({item_id!r}): the timer changed under every one of {_TRIES} tries "
        "(claimed and settled meanwhile); try again"
    )
