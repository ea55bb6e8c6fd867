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
    from flowsched.mongo.no_driver import MissingDriverFlowStore as MongoFlowStore  # type: ignore[assignment]
    from flowsched.mongo.no_driver import MissingDriverScheduler as MongoScheduler  # type: ignore[assignment]

__all__ = ["MongoFlowStore", "MongoScheduler"]

# Both are also public as flowsched.MongoScheduler / flowsched.MongoFlowStore: reprs and
# tracebacks say so (see flowsched/__init__.py).
MongoFlowStore.__module__ = MongoScheduler.__module__ = "flowsched"
