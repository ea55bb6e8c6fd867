"""MongoDB adapter (public): durable timers and flow instances in MongoDB collections.

:class:`MongoScheduler` keeps timers shared by several nodes through one collection;
:class:`MongoFlowStore` keeps flow instances, so flows survive restarts, and
:class:`AsyncMongoFlowStore` does the same on pymongo's ``AsyncCollection`` (for
``build_async()`` domains). All three are also importable from :mod:`flowsched`. Every
other module of this package is internal.

Needs the driver (``pip install 'flowsched[mongo]'``). Without it this package still imports,
and building either class raises an ``ImportError`` that names the extra.

The modules, in the order one timer meets them (see docs/explanation/architecture.md):

* ``scheduler`` - ``MongoScheduler``: the port's calls; ``arguments`` checks its arguments,
  ``from_config`` builds one from ``application.conf``, ``wiring`` assembles what both
  faces build alike (node id, store, claims and history).
* ``documents`` - an item, dead letter or quarantine record as a BSON document, and back.
* ``store`` - the collections (items, ``_dead``, ``_quarantine``, ``_nodes``,
  ``_settings``) and their one-round-trip operations; ``indexes`` - their indexes and
  the bucket count the first node recorded.
* ``sweeper`` - the background loop: claim, dispatch to workers, renew, settle;
  ``pacing`` says when it claims and how far it looks ahead.
* ``change_stream`` - push wake-up: tells a node at once of an item made due elsewhere.
* ``commands`` - the procedures' operations (``Call``, ``Find``) and their two drivers:
  ``drive`` (pymongo ``Collection``, in the calling thread) and ``drive_async``
  (``AsyncCollection``); claims, settlements, quarantine and the store are written once.
* ``async_scheduler`` - ``AsyncMongoScheduler``: the port's calls as coroutines;
  ``async_sweeper`` its firing task, ``async_wakeup`` its change stream.
* ``claims`` - claiming due documents under a lease, renewing, settling (``Claims``).
* ``candidates`` - the claim query: which documents a claim reads, and where it stops.
* ``claimed_batch`` - sorts a claimed batch into deliveries, settlements and quarantine;
  ``run_due``'s delivery on the calling thread.
* ``settlement`` - a claim's outcome (``Settlement``) and the fenced writes it becomes.
* ``local_writes`` - skips a claimed item this node has cancelled or replaced since.
* ``leases`` - when each held claim's lease ends: a lapsed claim is never started, a run
  that completes after its lease is a late completion (both faces' rule).
* ``server_clock`` - the database's clock: this node's offset from the server's time.
* ``quarantine`` - unusable (poison) documents moved aside, with the reason.
* ``transient`` - which driver errors are outages; bounded retries and their backoff.
* ``nodes`` - node heartbeats: which live node serves which routes (procedures: both faces).
* ``timer_query`` - ``timers()``'s keyset pages on the ``due_id`` index, ``pause`` and
  ``resume`` (procedures: both faces); ``steering`` - those calls on the two schedulers.
* ``inspection`` - read-only pages and counts for ``flowsched timers``.
* ``migration`` - routes and buckets for items stored by older versions.
* ``flow_store`` - ``MongoFlowStore``; ``async_flow_store`` - ``AsyncMongoFlowStore``;
  ``no_driver`` - stand-ins without pymongo.
* ``timer_store`` - ``MongoTimerStore``: the store interface (:mod:`flowsched.store`) on
  these documents, for the node core; ``async_timer_store`` - ``AsyncMongoTimerStore``, its
  asyncio twin. Both run the procedures of ``timer_ops`` (the firing path in
  ``timer_claims``); ``timer_history`` has the ``timers()`` reads.
"""

try:
    from flowsched.mongo.async_flow_store import AsyncMongoFlowStore
    from flowsched.mongo.async_timer_store import AsyncMongoTimerStore
    from flowsched.mongo.flow_store import MongoFlowStore
    from flowsched.mongo.scheduler import MongoScheduler
    from flowsched.mongo.timer_store import MongoTimerStore
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without pymongo
    if (exc.name or "").partition(".")[0] not in {"pymongo", "bson"}:
        raise
    from flowsched.mongo.no_driver import (  # type: ignore[assignment]
        MissingDriverAsyncFlowStore as AsyncMongoFlowStore,
    )
    from flowsched.mongo.no_driver import MissingDriverFlowStore as MongoFlowStore  # type: ignore[assignment]
    from flowsched.mongo.no_driver import MissingDriverScheduler as MongoScheduler  # type: ignore[assignment]

    MongoTimerStore = MongoScheduler  # type: ignore[assignment,misc]  # raises the same ImportError
    AsyncMongoTimerStore = MongoScheduler  # type: ignore[assignment,misc]  # the same

__all__ = [
    "AsyncMongoFlowStore",
    "AsyncMongoTimerStore",
    "MongoFlowStore",
    "MongoScheduler",
    "MongoTimerStore",
]

# All are also public as flowsched.MongoScheduler etc.: reprs and tracebacks say so (see
# flowsched/__init__.py).
AsyncMongoFlowStore.__module__ = MongoFlowStore.__module__ = MongoScheduler.__module__ = "flowsched"
