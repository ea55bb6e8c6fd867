"""MongoDB adapter: durable timers shared by several nodes through one collection.

Needs the driver (``pip install 'flowsched[mongo]'``). Without it this package still imports,
and building a :class:`MongoScheduler` raises an ``ImportError`` that names the extra.
"""

try:
    from flowsched.mongo.scheduler import MongoScheduler
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without pymongo
    if exc.name not in {"pymongo", "bson"}:
        raise
    from flowsched.mongo.no_driver import MongoScheduler  # type: ignore[assignment]

__all__ = ["MongoScheduler"]
