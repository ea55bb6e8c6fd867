"""Internal: ``AsyncMongoFlowStore``, flow instances in a pymongo ``AsyncCollection``.

The asyncio twin of :class:`~flowsched.mongo.flow_store.MongoFlowStore`: the same documents
(one per instance, ``_id`` = flow id) and the same optimistic fence on ``version``, so the
two may share one collection. Its calls are coroutines: it is an
:class:`~flowsched.flow.store.AsyncFlowStore`, for ``build_async()`` domains only.
"""

from __future__ import annotations

from typing import Any

from pymongo.errors import DuplicateKeyError

from flowsched.flow.instance import FlowInstance
from flowsched.mongo.flow_store import already_exists, document, fence, replaced

__all__ = ["AsyncMongoFlowStore"]


class AsyncMongoFlowStore:
    """An :class:`~flowsched.flow.store.AsyncFlowStore` on a pymongo ``AsyncCollection``.

    ``load`` returns the stored instance or ``None``; ``insert`` stores a new one at version 1
    (:class:`FlowAlreadyExistsError` if the id is taken); ``update`` replaces the stored
    instance only while its version is the one loaded (:class:`ConcurrentUpdateError`
    otherwise), so two nodes deciding for one instance at once cannot lose either decision.

    >>> store = AsyncMongoFlowStore(scheduler.collection.database["payments"])  # doctest: +SKIP
    """

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    async def load(self, flow_id: str) -> FlowInstance | None:
        """The stored instance (with its current ``version``), or ``None``."""
        doc = await self.collection.find_one({"_id": flow_id})
        return None if doc is None else FlowInstance.from_document(doc)

    async def insert(self, instance: FlowInstance) -> FlowInstance:
        """Store ``instance`` at version 1 and return it."""
        stored = instance.evolve(version=1)
        try:
            await self.collection.insert_one(document(stored))
        except DuplicateKeyError:
            raise already_exists(instance) from None
        return stored

    async def update(self, instance: FlowInstance) -> FlowInstance:
        """Replace the stored instance at ``instance.version``; return it at the next one."""
        stored = instance.evolve(version=instance.version + 1)
        result = await self.collection.replace_one(fence(instance), document(stored))
        return replaced(stored, result.matched_count)
