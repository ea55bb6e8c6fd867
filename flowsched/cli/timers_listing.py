"""Internal: the pages of ``flowsched timers list``, read with ``timers()``'s own query.

The rows come from :func:`flowsched.mongo.timer_query.document_page_steps` - the query
``MongoScheduler.timers()`` runs: the same filters, the same ``(due, _id)`` order and index,
the same keyset cursor - read as documents, so that a malformed one is still shown (with
the reason) rather than left out. What the CLI adds: the total (one count), ``--page N``
(N keyset pages walked, no skip) and ``--after ID`` (the cursor of that timer, and one count
for where the page starts).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from flowsched.mongo.documents import bson_utc_or_none
from flowsched.mongo.inspection import Page
from flowsched.mongo.timer_query import document_page_steps, timer_query
from flowsched.steering_query import TimerFilters

if TYPE_CHECKING:
    from flowsched.mongo.store import TimerStore

__all__ = ["list_page"]


def list_page(
    store: TimerStore,
    filters: TimerFilters,
    number: int | None,
    after: str | None,
    extra: dict[str, Any] | None = None,
) -> Page | None:
    """Page ``number`` (from 1) of ``filters``, or the page after timer ``after`` (``None``
    if no timer has that id). ``extra``: more conditions (``--overdue``)."""
    query = _with(timer_query(filters), extra)
    total = int(store.items.count_documents(query))
    if after is not None:
        found = store.items.find_one({"_id": after}, {"due": 1})
        due = None if found is None else bson_utc_or_none(found.get("due"))
        if due is None:
            return None
        before = {"$or": [{"due": {"$lt": due}}, {"due": due, "_id": {"$lte": after}}]}
        shown = int(store.items.count_documents({"$and": [query, before]}))
        cursored = replace(filters, after=(due, after))
        documents, _ = store.run(document_page_steps(cursored, extra))
        return Page(documents, total, shown + 1)
    page, cursor = 1, None
    while True:
        current = filters if cursor is None else filters.following(cursor)
        documents, cursor = store.run(document_page_steps(current, extra))
        if page == (number or 1):
            return Page(documents, total, (page - 1) * filters.limit + 1)
        if cursor is None:  # past the end
            return Page([], total, page * filters.limit + 1)
        page += 1


def _with(query: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    return {"$and": [query, extra]} if extra else query

