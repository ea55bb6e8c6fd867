"""History attempts on PostgreSQL are written once, when they end (schema version 4).

A claim or a start writes nothing to ``<table>_history``: the attempt a node is running is
read from its live row (``started_at``, owner, attempts, generation). Its end writes it: a
settle, a quarantine, a lapse (by the next claim, ended at the old lease end). A cancel,
replace or ``remove_flow`` that meets a started row keeps its attempt, open, in the same
statement; the late settle of that run is stale for the row but ends that kept attempt with
its outcome (as the run truly ended, after the cancel).
A version-3 table keeps its open attempts readable (each shown once) after the upgrade."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta

import psycopg
import pytest
from pg_kit import START, clock_of, clocked_store

from flowsched import ManualClock
from flowsched.outcomes import Completed, Failure, NextSlot, Redeliver
from flowsched.postgres.async_store import AsyncPostgresTimerStore
from flowsched.postgres.queries import Queries
from flowsched.postgres.schema import SCHEMA_VERSION, migrate
from flowsched.postgres.store import PostgresTimerStore
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.store.records import Settlement

LEASE = timedelta(seconds=30)
ROUTES = {"h:h"}


def _item(item_id: str, flow_id: str | None = None) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, START, flow_id, handler="h")


@pytest.fixture
def store(postgres_url: str, fresh_table: Callable[[], str]) -> Iterator[PostgresTimerStore]:
    with clocked_store(postgres_url, fresh_table()) as store:
        yield store


def _written(store: PostgresTimerStore, item_id: str) -> list[tuple[object, ...]]:
    """The rows of ``<table>_history`` for ``item_id``: (node, ended, outcome), in order."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            f'SELECT node, ended, outcome FROM "{store.table}_history" '
            "WHERE item_id = %s ORDER BY seq",
            (item_id,),
        ).fetchall()
    return [tuple(row) for row in rows]


def test_a_running_attempt_is_read_from_its_row_and_written_once_when_it_ends(
    store: PostgresTimerStore,
) -> None:
    store.put(_item("x"))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    [attempt] = store.history("x")
    assert (attempt.node, attempt.started, attempt.ended) == ("n1", START, None), attempt
    assert (attempt.generation, attempt.attempt) == (claim.generation, 0)
    assert _written(store, "x") == [], "the claim wrote a history row"
    clock_of(store).advance(timedelta(seconds=3))
    failure = Failure("failed", "ValueError", "boom")
    again = START + timedelta(minutes=1)
    [result] = store.settle([Settlement(claim, Redeliver(again, 1, "ValueError: boom", failure))])
    assert result.applied
    [attempt] = store.history("x")
    assert attempt.outcome == "failed" and attempt.ended == START + timedelta(seconds=3)
    assert attempt.started == START and attempt.error_type == "ValueError", attempt
    assert attempt.error_message == "boom" and attempt.attempt == 0, attempt
    assert _written(store, "x") == [("n1", START + timedelta(seconds=3), "failed")]


def test_the_confirmed_start_of_a_queued_claim_is_read_from_its_row_too(
    store: PostgresTimerStore,
) -> None:
    store.put(_item("x"))
    [claim] = store.claim_due(ROUTES, "n1", LEASE, 10)
    assert store.history("x") == [], "a queued claim shows as started"
    assert store.confirm_start([claim]) == [claim]
    [attempt] = store.history("x")
    assert (attempt.node, attempt.ended) == ("n1", None) and _written(store, "x") == []
    store.settle([Settlement(claim, Completed())])
    assert [a.outcome for a in store.history("x")] == ["succeeded"]


@pytest.mark.parametrize("how", ["cancel", "replace", "remove_flow"])
def test_a_cancel_or_replace_of_a_started_row_keeps_its_attempt_open(
    store: PostgresTimerStore, how: str
) -> None:
    store.put(_item("x", flow_id="f"))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    clock_of(store).advance(timedelta(seconds=2))
    if how == "cancel":
        assert store.remove("x")
    elif how == "replace":
        store.put(_item("x", flow_id="f"))
    else:
        assert store.remove_flow("f") == ["x"]
    assert _written(store, "x") == [("n1", None, None)], "the started attempt was not kept"
    [kept] = store.history("x")
    assert (kept.node, kept.started, kept.ended) == ("n1", START, None), kept
    assert kept.generation == claim.generation
    clock_of(store).advance(timedelta(seconds=3))
    [late] = store.settle([Settlement(claim, Completed())])
    assert not late.applied, "the run of the old form settled over the cancel or replace"
    [ended] = store.history("x")  # the run's outcome ends the kept attempt, after the cancel
    assert (ended.started, ended.ended, ended.outcome) == (START, START + timedelta(seconds=5),
                                                           "succeeded"), ended  # fmt: skip
    assert _written(store, "x") == [("n1", START + timedelta(seconds=5), "succeeded")]
    if how == "replace":  # the new form runs as a new attempt after the kept one
        [again] = store.claim_started(ROUTES, "n2", LEASE, 10)
        assert again.generation != claim.generation
        assert [a.node for a in store.history("x")] == ["n1", "n2"]


def test_a_cancel_of_an_unstarted_claim_writes_nothing(store: PostgresTimerStore) -> None:
    store.put(_item("x"))
    store.claim_due(ROUTES, "n1", LEASE, 10)
    assert store.remove("x")
    assert store.history("x") == [] and _written(store, "x") == []


def test_a_lapsed_started_claim_is_written_lapsed_once_when_claimed_again(
    store: PostgresTimerStore,
) -> None:
    store.put(_item("x"))
    store.put(_item("queued"))
    [dead, _queued] = store.claim_due(ROUTES, "dead-node", LEASE, 10)
    assert store.confirm_start([dead]) == [dead]  # "queued" never starts
    clock_of(store).advance(LEASE + timedelta(seconds=1))
    assert len(store.claim_started(ROUTES, "n2", LEASE, 10)) == 2
    assert _written(store, "x") == [("dead-node", START + LEASE, "lapsed")]
    assert _written(store, "queued") == [], "a claim that never started was written lapsed"
    assert [(a.node, a.outcome) for a in store.history("x")] == [
        ("dead-node", "lapsed"),
        ("n2", None),
    ]
    assert [(a.node, a.outcome) for a in store.history("queued")] == [("n2", None)]


def test_a_recurring_item_keeps_its_limit_in_the_table_not_only_when_read(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    clock = ManualClock(START)
    every = Recurrence.every(timedelta(minutes=1)).anchored(START)
    item = ScheduleItem("r", ScheduleKind.TIMER, START, handler="h", recurrence=every)
    with PostgresTimerStore(
        postgres_url, table=fresh_table(), clock=clock, history_limit=3, pool_size=2
    ) as store:
        store.put(item)
        for run in range(6):  # one generation, attempts back to 0 at every slot
            [claim] = store.claim_started(ROUTES, f"n{run}", LEASE, 1)
            due = START + timedelta(minutes=run + 1)
            outcome = NextSlot(due - timedelta(minutes=1), due, runs=run + 1)
            [result] = store.settle([Settlement(claim, outcome)])
            assert result.applied
            clock.advance(timedelta(minutes=1))
        assert len(_written(store, "r")) == 3
        [claim] = store.claim_started(ROUTES, "n6", LEASE, 1)
        assert [a.node for a in store.history("r")] == ["n4", "n5", "n6"], "not capped"


def test_the_async_store_keeps_a_cancelled_started_attempt(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    async def scenario() -> None:
        clock = ManualClock(START)
        async with AsyncPostgresTimerStore(postgres_url, table=fresh_table(), clock=clock) as s:
            await s.put(_item("x"))
            [claim] = await s.claim_started(ROUTES, "n1", LEASE, 10)
            [running] = await s.history("x")
            assert (running.node, running.ended) == ("n1", None)
            assert await s.remove("x")
            [kept] = await s.history("x")
            assert (kept.node, kept.started, kept.ended) == ("n1", START, None)
            clock.advance(timedelta(seconds=1))
            [result] = await s.settle([Settlement(claim, Completed())])
            assert not result.applied
            [ended] = await s.history("x")  # the run's outcome ends the kept attempt
            assert (ended.ended, ended.outcome) == (START + timedelta(seconds=1), "succeeded")

    asyncio.run(scenario())


def _version_3_table(postgres_url: str, table: str) -> None:
    """A table as flowsched with schema version 3 left it: item "old" claimed and started by
    "old-node", its attempt open in the history (written at its start), and one earlier
    attempt closed."""
    queries = Queries(table)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(queries["schema_version_table"])
        for name in ("migration_1", "migration_2", "migration_3"):
            conn.execute(queries[name])
        conn.execute(queries["schema_set_version"], {"version": 3})
        conn.execute(
            f'INSERT INTO "{table}" (id, generation, kind, handler, route, due, attempts, owner, '
            "lease_until, claim_token, started_at, scheduled_at) VALUES ('old', 7, 'TIMER', "
            "'h', 'h:h', %(start)s, 1, 'old-node', %(lease)s, 'tok', %(start)s, %(start)s)",
            {"start": START, "lease": START + LEASE},
        )
        conn.execute(
            f'INSERT INTO "{table}_history" (item_id, generation, attempt, node, started, '
            "ended, outcome) VALUES ('old', 7, 0, 'n0', %(before)s, %(before)s, 'failed'), "
            "('old', 7, 1, 'old-node', %(start)s, NULL, NULL)",
            {"before": START - timedelta(seconds=5), "start": START},
        )
        assert migrate(conn, table) == SCHEMA_VERSION >= 4


@pytest.mark.parametrize("then", ["lapse", "cancel"])
def test_a_version_3_open_attempt_reads_once_and_ends_after_the_upgrade(
    postgres_url: str, fresh_table: Callable[[], str], then: str
) -> None:
    table = fresh_table()
    _version_3_table(postgres_url, table)
    clock = ManualClock(START + timedelta(seconds=1))
    with PostgresTimerStore(postgres_url, table=table, clock=clock, pool_size=2) as store:
        first, running = store.history("old")  # the open row and the live row: one attempt
        assert (first.node, first.outcome) == ("n0", "failed")
        assert (running.node, running.started, running.ended) == ("old-node", START, None)
        assert running.attempt == 1 and running.generation == 7
        if then == "lapse":
            clock.advance(LEASE)
            [claim] = store.claim_started(ROUTES, "new-node", LEASE, 10)
            shown = [(a.node, a.outcome, a.ended) for a in store.history("old")]
            assert shown == [
                ("n0", "failed", START - timedelta(seconds=5)),
                ("old-node", "lapsed", START + LEASE),
                ("new-node", None, None),
            ], shown
            store.settle([Settlement(claim, Completed())])
            assert [a.outcome for a in store.history("old")] == ["failed", "lapsed", "succeeded"]
        else:
            assert store.remove("old")
            shown = [(a.node, a.outcome) for a in store.history("old")]
            assert shown == [("n0", "failed"), ("old-node", None)], shown


@pytest.mark.parametrize("how", ["cancel", "replace"])
def test_a_cancel_or_replace_waiting_on_a_claim_that_commits_first_keeps_its_start(
    store: PostgresTimerStore, how: str
) -> None:
    """A cancel or replace reads the row it removes under its lock: a claim_started holding
    the row when it arrives commits first, and its attempt is kept, not lost (a replace
    whose started_at test were judged on its snapshot lost it)."""
    import threading

    store.put(_item("x"))
    params = store.setup.params(routes=["h:h"], owner="n1", lease=LEASE, limit=10, keep=20)
    with store.pool.connection() as claimer:
        with claimer.transaction():
            [row] = claimer.execute(store.setup.queries["claim_started"], params).fetchall()
            call = (store.remove, "x") if how == "cancel" else (store.put, _item("x"))
            replaced = threading.Thread(target=call[0], args=call[1:])
            replaced.start()
            replaced.join(0.3)  # it waits for the claim's row lock
        replaced.join()
    [kept] = store.history("x")
    assert (kept.node, kept.ended, kept.generation) == ("n1", None, row[1]), kept


def test_a_failed_run_of_a_cancelled_row_ends_its_kept_attempt_failed(
    store: PostgresTimerStore,
) -> None:
    """The general settle (a retry's outcome) ends a kept attempt with its error too."""
    store.put(_item("y"))
    [claim] = store.claim_started(ROUTES, "n1", LEASE, 10)
    assert store.remove("y")
    clock_of(store).advance(timedelta(seconds=4))
    failure = Failure("failed", "TimeoutError", "gateway down", 'File "pay.py", line 7')
    retry = Redeliver(START + LEASE, 1, "TimeoutError: gateway down", failure)
    [late] = store.settle([Settlement(claim, retry)])
    assert not late.applied
    [ended] = store.history("y")
    assert (ended.ended, ended.outcome, ended.error_type) == (
        START + timedelta(seconds=4),
        "failed",
        "TimeoutError",
    ), ended
    # A stale settle of a claim that never started (nothing kept) writes nothing.
    store.put(_item("z"))
    [queued] = store.claim_due(ROUTES, "n1", LEASE, 10)
    assert store.remove("z")
    assert not store.settle([Settlement(queued, Completed())])[0].applied
    assert _written(store, "z") == [] and store.history("z") == []


def test_a_retried_stale_settle_ends_only_its_own_attempt(store: PostgresTimerStore) -> None:
    """A settle sent again (its first reply lost) is stale: it must not end the attempt a
    cancel kept open for a later attempt of the same item, generation and node."""
    store.put(_item("w"))
    [first] = store.claim_started(ROUTES, "n1", LEASE, 10)
    failure = Failure("failed", "TimeoutError", "gateway down", None)
    retry = Settlement(first, Redeliver(START, 1, "TimeoutError: gateway down", failure))
    assert store.settle([retry])[0].applied
    clock_of(store).advance(timedelta(seconds=2))
    [second] = store.claim_started(ROUTES, "n1", LEASE, 10)
    assert (second.attempt, second.generation) == (1, first.generation)
    assert store.remove("w")
    assert not store.settle([retry])[0].applied  # the first outcome again: stale
    assert [(a.attempt, a.ended) for a in store.history("w")] == [(0, START), (1, None)], (
        "the retried settle ended the later attempt"
    )
    clock_of(store).advance(timedelta(seconds=1))
    assert not store.settle([Settlement(second, Completed())])[0].applied
    assert [(a.attempt, a.outcome) for a in store.history("w")] == [(0, "failed"), (1, "succeeded")]
