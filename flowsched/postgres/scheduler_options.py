"""Internal: what both PostgreSQL scheduler faces (``PostgresScheduler`` and
``AsyncPostgresScheduler``) hand their timer store, worked out once from the arguments they
share."""

from __future__ import annotations

from datetime import timedelta
from typing import TypedDict

from flowsched.clock import Clock
from flowsched.history import HistoryPolicy

__all__ = ["StoreOptions", "notify_window", "store_options"]


def notify_window(poll_interval: timedelta) -> timedelta:
    """How soon a timer must be due for its ``schedule`` to wake the listening nodes: a
    timer due later is found by a node's next poll anyway."""
    return max(2 * poll_interval, timedelta(seconds=1))


class StoreOptions(TypedDict):
    """The keyword arguments of ``PostgresTimerStore`` and ``AsyncPostgresTimerStore`` a
    scheduler face sets (the pool or conninfo goes first, apart)."""

    table: str
    clock: Clock | None
    notify_within: timedelta
    op_timeout: timedelta | None
    pool_size: int
    durable_firing: bool
    history_limit: int
    history_retention: timedelta


def store_options(
    *,
    table: str,
    clock: Clock | None,
    poll_interval: timedelta,
    op_timeout: timedelta | None,
    pool_size: int | None,
    durable_firing: bool,
    history: HistoryPolicy | None,
) -> StoreOptions:
    """The store's arguments for a scheduler built with these: ``notify_within`` from
    ``poll_interval`` (:func:`notify_window`), a pool of 4 unless ``pool_size`` is given,
    and the history kept as ``history`` says (default :class:`HistoryPolicy`)."""
    history = history or HistoryPolicy()
    return StoreOptions(
        table=table,
        clock=clock,
        notify_within=notify_window(poll_interval),
        op_timeout=op_timeout,
        pool_size=pool_size or 4,
        durable_firing=durable_firing,
        history_limit=history.limit,
        history_retention=history.retention,
    )
