"""Internal: ``MongoFlowStore``, flow instances in a MongoDB collection (survive restarts).

One document per instance, ``_id`` = flow id, with a ``version`` field used as an optimistic
fence: an update matches only the version that was loaded, so two hosts (or threads) deciding
for one instance at once cannot lose either decision — one of them reloads and decides again.
"""

from __future__ import annotations

from typing import Any

from pymongo.errors import DuplicateKeyError

from flowsched.flow.instance import FlowInstance
from flowsched.flow.store import ConcurrentUpdateError, FlowAlreadyExistsError

__all__ = ["MongoFlowStore", "already_exists", "document", "fence", "replaced"]


class MongoFlowStore:
    """A :class:`~flowsched.flow.store.FlowStore` on a pymongo (or mongomock) collection.

    >>> store = MongoFlowStore(MongoClient(uri)["payments"]["flow_instances"])  # doctest: +SKIP
    """

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def load(self, flow_id: str) -> FlowInstance | None:
        doc = self.collection.find_one({"_id": flow_id})
        return None if doc is None else FlowInstance.from_document(doc)

    def insert(self, instance: FlowInstance) -> FlowInstance:
        stored = instance.evolve(version=1)
        try:
            self.collection.insert_one(document(stored))
        except DuplicateKeyError:
            raise already_exists(instance) from None
        return stored

    def update(self, instance: FlowInstance) -> FlowInstance:
        stored = instance.evolve(version=instance.version + 1)
        result = self.collection.replace_one(fence(instance), document(stored))
        return replaced(stored, result.matched_count)


def document(instance: FlowInstance) -> dict[str, Any]:
    """The document that stores ``instance`` (``_id`` = flow id)."""
    return {"_id": instance.flow_id, **instance.to_document()}


def fence(instance: FlowInstance) -> dict[str, Any]:
    """The filter an update of ``instance`` matches: its id at the version it was loaded at."""
    return {"_id": instance.flow_id, "version": instance.version}


def already_exists(instance: FlowInstance) -> FlowAlreadyExistsError:
    """The error of an insert whose flow id is taken."""
    return FlowAlreadyExistsError(f"flow instance {instance.flow_id!r} already exists")


def replaced(stored: FlowInstance, matched: int) -> FlowInstance:
    """``stored`` if the fenced replace matched, else :class:`ConcurrentUpdateError`."""
    if matched == 0:
        loaded = stored.version - 1
        raise ConcurrentUpdateError(
            f"flow instance {stored.flow_id!r}: version {loaded} is no longer the stored one"
        )
    return stored
