"""What the PostgreSQL store tests share: a store on a fresh table whose clock is a
``ManualClock`` at :data:`START` (due times and leases compared by it, in SQL)."""

from __future__ import annotations

from datetime import UTC, datetime

from flowsched import ManualClock
from flowsched.postgres.store import PostgresTimerStore

START = datetime(2026, 1, 1, tzinfo=UTC)


def clocked_store(postgres_url: str, table: str) -> PostgresTimerStore:
    """A store on ``table`` (made) whose clock is a ``ManualClock`` at :data:`START`."""
    return PostgresTimerStore(postgres_url, table=table, clock=ManualClock(START), pool_size=2)


def clock_of(store: PostgresTimerStore) -> ManualClock:
    """``store``'s manual clock."""
    assert isinstance(store.clock, ManualClock)
    return store.clock
