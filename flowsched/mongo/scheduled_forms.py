"""Internal: the documents :class:`~flowsched.MongoScheduler` and
:class:`~flowsched.AsyncMongoScheduler` write and read on the port's calls, made and read
alike by both (one copy): no I/O here, each scheduler sends them its own way."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from flowsched.errors import MalformedDocument
from flowsched.mongo.arguments import check_bson_payload
from flowsched.mongo.documents import item_document, new_generation, stored_item
from flowsched.records import ScheduleItem

__all__ = ["new_document", "ours", "read_item", "stored_form"]

log = logging.getLogger("flowsched.mongo")


def new_document(item: ScheduleItem, rng: random.Random, bucket: int) -> dict[str, Any]:
    """``item``'s document under a new generation from ``rng``, in ``bucket``
    (``ValueError`` naming the item if its payload cannot be stored as BSON)."""
    document = item_document(item, new_generation(rng), bucket=bucket)
    check_bson_payload(item, document)
    return document


def stored_form(item: ScheduleItem, document: Mapping[str, Any]) -> ScheduleItem:
    """``item`` as ``document`` stores it: ``due`` cut to whole milliseconds, the slot
    applied, the new generation."""
    stored = item.moved(document["due"], document.get("applied"))
    return stored.with_generation(document["generation"])


def read_item(document: Mapping[str, Any] | None, where: str) -> ScheduleItem | None:
    """The item ``document`` stores; ``None`` for no document, or for a malformed one
    (logged, naming the collection ``where``: the sweep quarantines it)."""
    if document is None:
        return None
    try:
        return stored_item(document).item
    except MalformedDocument as exc:
        log.error("%s: %s", where, exc)
        return None


def ours(found: Mapping[str, Any] | None, document: Mapping[str, Any]) -> bool:
    """Whether ``found``, read back after an insert of ``document`` found its id taken, is
    that very insert (a retry repeated it) rather than a newer item."""
    return found is not None and found.get("generation") == document["generation"]
