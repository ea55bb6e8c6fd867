"""PostgreSQL adapter (public): durable timers and flow instances in PostgreSQL tables.

Needs psycopg 3 and psycopg_pool (``pip install 'flowsched[postgres]'``); importing this
package without them raises an ``ImportError`` that names the extra. ``import flowsched``
never imports it: the top-level names load it when first asked for.

* :class:`PostgresScheduler` / :class:`AsyncPostgresScheduler` - the scheduler port:
  a node core, a driver and the store below (also importable from :mod:`flowsched`).
* :class:`PostgresTimerStore` / :class:`AsyncPostgresTimerStore` - the
  :class:`~flowsched.store.TimerStore` (and its async twin) on a table, for a node core.
* :class:`PostgresFlowStore` / :class:`AsyncPostgresFlowStore` - flow instances.
* :func:`migrate` - create or upgrade a table by hand (``flowsched db migrate URL``);
  the stores do it themselves when they start.

The modules, in the order one timer meets them:

* ``queries.sql`` / ``queries`` - every SQL statement, named, and the table's names.
* ``schema`` - the tables, versioned migrations under an advisory lock.
* ``rows`` - rows to records and back; what ``jsonb`` cannot keep is refused first.
* ``operations`` - each store operation as a plan (statements and decoding, no I/O);
  ``settle_columns`` a batch of outcomes as the settle statement's arrays; ``plans`` runs a
  plan on a sync or an asyncio connection.
* ``store`` / ``async_store`` - the two faces; ``connections`` - pools, given or owned.
* ``scheduler`` / ``async_scheduler`` - the two faces of the port, thin.
* ``wakeup`` - LISTEN/NOTIFY: a node hears of a row due soon at once; ``heartbeats`` -
  each started node's row in ``<table>_nodes`` (``store.live_nodes()``).
* ``flow_store`` - flow instances.
"""

try:
    from flowsched.postgres.async_scheduler import AsyncPostgresScheduler
    from flowsched.postgres.async_store import AsyncPostgresTimerStore
    from flowsched.postgres.flow_store import AsyncPostgresFlowStore, PostgresFlowStore
    from flowsched.postgres.scheduler import PostgresScheduler
    from flowsched.postgres.schema import SCHEMA_VERSION, migrate, migrate_async
    from flowsched.postgres.store import PostgresTimerStore
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without psycopg
    if (exc.name or "").partition(".")[0] not in {"psycopg", "psycopg_pool"}:
        raise
    raise ImportError(
        f"flowsched.postgres needs psycopg 3 and psycopg_pool ({exc.name} is missing): "
        "pip install 'flowsched[postgres]'"
    ) from exc

__all__ = [
    "SCHEMA_VERSION",
    "AsyncPostgresFlowStore",
    "AsyncPostgresScheduler",
    "AsyncPostgresTimerStore",
    "PostgresFlowStore",
    "PostgresScheduler",
    "PostgresTimerStore",
    "migrate",
    "migrate_async",
]
