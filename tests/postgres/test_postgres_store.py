"""``PostgresTimerStore`` and ``AsyncPostgresTimerStore`` keep every guarantee of the store
interface (the conformance suite ``check_timer_store``), judged by an injected clock and by
the server's own; history past its retention is purged."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from flowsched.clock import ManualClock
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.store import PostgresTimerStore
from flowsched.testing import check_timer_store


@pytest.fixture
def stores(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[list[PostgresTimerStore]]:
    made: list[PostgresTimerStore] = []
    yield made
    for store in made:
        store.close()


def test_the_store_passes_the_conformance_suite_on_a_manual_clock(
    postgres_url: str, fresh_table: Callable[[], str], stores: list[PostgresTimerStore]
) -> None:
    def factory(clock: ManualClock) -> PostgresTimerStore:
        store = PostgresTimerStore(postgres_url, table=fresh_table(), clock=clock, pool_size=2)
        stores.append(store)
        return store

    check_timer_store(factory)


def test_the_store_passes_the_conformance_suite_on_the_servers_clock(
    postgres_url: str, fresh_table: Callable[[], str], stores: list[PostgresTimerStore]
) -> None:
    def factory() -> PostgresTimerStore:
        store = PostgresTimerStore(postgres_url, table=fresh_table(), pool_size=2)
        stores.append(store)
        return store

    check_timer_store(factory)


def test_the_async_store_passes_the_conformance_suite_on_a_manual_clock(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    # The suite drives an async store on an event loop of its own (in a thread): each
    # store opens its pool there, on its first call, and is closed with that loop.
    def factory(clock: ManualClock) -> AsyncPostgresTimerStore:
        return AsyncPostgresTimerStore(postgres_url, table=fresh_table(), clock=clock, pool_size=2)

    check_timer_store(factory)


def test_history_past_its_retention_goes_when_the_node_has_time(
    postgres_url: str, fresh_table: Callable[[], str], stores: list[PostgresTimerStore]
) -> None:
    from datetime import UTC, datetime, timedelta

    from flowsched.outcomes import Completed
    from flowsched.records import ScheduleItem, ScheduleKind
    from flowsched.store.records import Settlement

    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    store = PostgresTimerStore(
        postgres_url, table=fresh_table(), clock=clock, history_retention=timedelta(days=7)
    )
    stores.append(store)
    store.put(ScheduleItem("x", ScheduleKind.TIMER, clock.now(), handler="h"))
    [claim] = store.claim_due({"h:h"}, "n", timedelta(seconds=30), 10)
    store.settle([Settlement(c, Completed()) for c in store.confirm_start([claim])])
    clock.advance(timedelta(days=6))
    store.next_due({"h:h"})
    assert [a.outcome for a in store.history("x")] == ["succeeded"], "purged too soon"
    clock.advance(timedelta(days=2))
    store.next_due({"h:h"})
    assert store.history("x") == [], "history past its retention was kept"
