"""The server drops every connection of a firing node (as a restart does): no timer is lost,
the node reconnects by itself and firing resumes; the LISTEN connection comes back too."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

import psycopg

from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind


def _drop_connections(url: str, application: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application,),
        ).fetchall()
    return len(rows)


def test_a_node_whose_connections_are_dropped_reconnects_and_loses_nothing(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    application = f"fs_outage_{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{separator}application_name={application}"
    fired: set[str] = set()
    lock = threading.Lock()
    seen = threading.Condition(lock)

    def handler(item: ScheduleItem, attempt: int) -> None:
        with seen:
            fired.add(item.id)
            seen.notify_all()

    def wait_for(count: int) -> bool:
        with seen:
            return seen.wait_for(lambda: len(fired) >= count, timeout=60)

    with PostgresScheduler(
        url, table=fresh_table(), poll_interval=timedelta(milliseconds=200), pool_size=2
    ) as node:
        node.register("h", handler)
        now = node.store.now()
        for n in range(40):
            due = now + timedelta(milliseconds=100 * n)
            node.schedule(ScheduleItem(f"a-{n}", ScheduleKind.TIMER, due, handler="h"))
        assert wait_for(10)
        assert _drop_connections(postgres_url, application) >= 1
        # Schedules made after the drop go through a fresh connection (or raise
        # SchedulerUnavailable while none can be had): retry until stored.
        _retrying(node.store.now)
        now = node.store.now()
        for n in range(10):
            item = ScheduleItem(f"b-{n}", ScheduleKind.TIMER, now, handler="h")
            _retrying(lambda item=item: node.schedule(item))
        assert wait_for(50), f"{50 - len(fired)} timers not fired after the drop"
    assert fired == {f"a-{n}" for n in range(40)} | {f"b-{n}" for n in range(10)}


def _retrying(call: Callable[[], object]) -> bool:
    from flowsched import SchedulerUnavailable

    for _ in range(50):
        try:
            call()
            return True
        except SchedulerUnavailable:
            threading.Event().wait(0.1)
    raise AssertionError("the store stayed unavailable for 5 s after the drop")
