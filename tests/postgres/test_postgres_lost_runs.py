"""A run lost with its node twice in a row counts as a failed delivery, on PostgreSQL.

Two dead nodes are simulated by calling the store directly: each takes the item with
``claim_started`` (its start recorded at once) and never settles it, so its lease ends (by
the server's clock). The scheduler that takes the item then has a claim with ``lapsed == 2``:
it does not call the handler but counts the last lost run as a failed delivery
(``DeliveryLost``) under the item's redelivery policy: a dead letter with ``max_attempts=1``,
else a redelivery, whose claim counts no lost run and runs the handler as attempt 1.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import psycopg

from flowsched import RedeliveryPolicy, ScheduleItem, ScheduleKind
from flowsched.postgres import AsyncPostgresScheduler, PostgresScheduler, PostgresTimerStore
from flowsched.routes import name_route
from flowsched.steering import Attempt

HANDLER = "crashes-its-node"
LEASE = timedelta(milliseconds=300)
WAIT = 30.0  # seconds: an upper bound for what the node does within a second, never reached
DIES = RedeliveryPolicy(initial=timedelta(milliseconds=100), max_attempts=1)
RETRIES = RedeliveryPolicy(initial=timedelta(milliseconds=100), maximum=timedelta(seconds=1))


def _lose_two_runs(url: str, table: str, item_id: str) -> None:
    """Schedule ``item_id`` due now and let two nodes start it and die (never settled)."""
    store = PostgresTimerStore(url, table=table, pool_size=1)
    try:
        store.put(ScheduleItem(item_id, ScheduleKind.TIMER, store.now(), handler=HANDLER))
        for node in ("dead-1", "dead-2"):
            [claim] = store.claim_started({name_route(HANDLER)}, node, LEASE, 10)
            assert claim.item.id == item_id and claim.attempt == 0
            while store.now() <= claim.lease_until:  # its lease ends, by the server's clock
                time.sleep(0.05)
    finally:
        store.close()


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT} s: {what}"
        time.sleep(0.05)


def _after_two_lost(history: list[Attempt]) -> list[tuple[str | None, int, str | None]]:
    """``history`` after its first two attempts, checked to be the dead nodes' lost runs:
    (outcome, attempt, error type) of each attempt after them, the scheduler's."""
    lost = [(a.node, a.outcome, a.attempt) for a in history[:2]]
    assert lost == [("dead-1", "lapsed", 0), ("dead-2", "lapsed", 0)], history
    assert all(a.node not in ("dead-1", "dead-2") for a in history[2:]), history
    return [(a.outcome, a.attempt, a.error_type) for a in history[2:]]


LOST = ("failed", 0, "DeliveryLost")  # the claim with two lost runs: not run, failed


def test_a_run_lost_twice_is_dead_lettered_without_calling_the_handler(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    _lose_two_runs(postgres_url, table, "poison")
    called: list[int] = []
    scheduler = PostgresScheduler(
        postgres_url, table=table, redelivery=DIES, lease=timedelta(seconds=5), pool_size=2
    )
    try:
        scheduler.register(HANDLER, lambda item, attempt: called.append(attempt))
        scheduler.start()
        _until(lambda: bool(scheduler.dead_letters()), "the item is dead-lettered")
        [dead] = scheduler.dead_letters()
        assert dead.item.id == "poison" and dead.attempts == 1
        assert "DeliveryLost" in dead.error, dead.error
        assert called == [], "the handler of a run lost twice was called again"
        assert not scheduler.exists("poison")
        assert _after_two_lost(scheduler.history("poison")) == [LOST]
    finally:
        scheduler.close()


def test_a_run_lost_twice_is_redelivered_and_runs_as_attempt_1(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    _lose_two_runs(postgres_url, table, "flaky")
    seen: list[tuple[int, tuple[object, ...] | None]] = []
    done = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:  # the claim, as stored
            row = conn.execute(
                f'SELECT attempts, lapses FROM "{table}" WHERE id = %s'.encode(), (item.id,)
            ).fetchone()
        seen.append((attempt, row))
        done.set()

    scheduler = PostgresScheduler(
        postgres_url, table=table, redelivery=RETRIES, lease=timedelta(seconds=5), pool_size=2
    )
    try:
        scheduler.register(HANDLER, handler)
        scheduler.start()
        assert done.wait(WAIT), "the redelivered item never ran"
        _until(lambda: not scheduler.exists("flaky"), "the redelivered run is settled")
        assert seen == [(1, (1, 0))], f"(attempt, stored (attempts, lapses)): {seen}"
        assert scheduler.dead_letters() == []
        assert _after_two_lost(scheduler.history("flaky")) == [LOST, ("succeeded", 1, None)]
    finally:
        scheduler.close()


def test_the_async_scheduler_dead_letters_a_run_lost_twice(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    _lose_two_runs(postgres_url, table, "poison")
    called: list[int] = []

    async def handler(item: ScheduleItem, attempt: int) -> None:
        called.append(attempt)

    async def scenario() -> None:
        scheduler = AsyncPostgresScheduler(
            postgres_url, table=table, redelivery=DIES, lease=timedelta(seconds=5), pool_size=2
        )
        scheduler.register(HANDLER, handler)
        await scheduler.start()
        try:
            deadline = time.monotonic() + WAIT
            while not await scheduler.dead_letters():
                assert time.monotonic() < deadline, "the item was never dead-lettered"
                await asyncio.sleep(0.05)
            [dead] = await scheduler.dead_letters()
            assert dead.item.id == "poison" and dead.attempts == 1
            assert "DeliveryLost" in dead.error, dead.error
            assert called == [], "the handler of a run lost twice was called again"
            assert _after_two_lost(await scheduler.history("poison")) == [LOST]
        finally:
            await scheduler.aclose()

    asyncio.run(scenario())
