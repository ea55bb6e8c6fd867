"""MongoDB adapter (public): durable timers and flow instances in MongoDB collections.

:class:`MongoScheduler` keeps timers shared by several nodes through one collection;
:class:`MongoFlowStore` keeps flow instances, so flows survive restarts. Both are also
importable from :mod:`flowsched`. Every other module of this package is internal.

Needs the driver (``pip install 'flowsched[mongo]'``). Without it this package still imports,
and building either class raises an ``ImportError`` that names the extra.
"""

try:
    from flowsched.mongo.flow_store import MongoFlowStore
    from flowsched.mongo.scheduler import MongoScheduler
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without pymongo
    if (exc.name or "").partition(".")[0] not in {"pymongo", "bson"}:
        raise
    from flowsched.mongo.no_driver import (  # type: ignore[assignment]
        MongoFlowStore,
        MongoScheduler,
    )

__all__ = ["MongoFlowStore", "MongoScheduler"]
