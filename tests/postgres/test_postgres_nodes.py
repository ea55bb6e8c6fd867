"""PostgresScheduler in real time, on the server's clock: every timer fires once across two
nodes on one table; a timer scheduled on one node wakes another at once (LISTEN/NOTIFY),
long before its poll; a row the node cannot use is quarantined while the others fire;
payloads PostgreSQL cannot keep exactly are refused before anything is sent."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest

from flowsched import PostgresScheduler, ScheduleItem, ScheduleKind
from flowsched.postgres import PostgresTimerStore

TIMER = ScheduleKind.TIMER


def _wait(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    event = threading.Event()
    for _ in range(int(seconds / 0.05)):
        if condition():
            return True
        event.wait(0.05)
    return condition()


def test_two_nodes_fire_every_timer_exactly_once(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    fired: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(item: ScheduleItem, attempt: int) -> None:
        with lock:
            fired[item.id] += 1

    nodes = [
        PostgresScheduler(
            postgres_url,
            table=table,
            node_id=f"node-{n}",
            poll_interval=timedelta(milliseconds=200),
            batch_size=20,
            pool_size=2,
        )
        for n in range(2)
    ]
    try:
        for node in nodes:
            node.register("count", handler)
            node.start()
        now = nodes[0].store.now()
        for n in range(300):
            due = now + timedelta(milliseconds=n * 2)
            nodes[n % 2].schedule(ScheduleItem(f"t-{n}", TIMER, due, handler="count"))
        assert _wait(lambda: sum(fired.values()) >= 300), f"fired {sum(fired.values())}"
    finally:
        for node in nodes:
            node.close()
    assert len(fired) == 300 and set(fired.values()) == {1}, fired.most_common(3)


def test_a_timer_scheduled_elsewhere_wakes_the_node_before_its_poll(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    fired = threading.Event()
    # The firing node polls every 60 s: only a notification can make it fire in time.
    firing = PostgresScheduler(
        postgres_url, table=table, poll_interval=timedelta(seconds=60), pool_size=2
    )
    other = PostgresScheduler(postgres_url, table=table, listen=False, pool_size=1)
    try:
        firing.register("wake", lambda item, attempt: fired.set())
        firing.start()
        firing.store.now()  # the node is up; give its listener a moment to LISTEN
        threading.Event().wait(1.0)
        due = other.store.now() + timedelta(milliseconds=300)
        other.schedule(ScheduleItem("w", TIMER, due, handler="wake"))
        assert fired.wait(30), "the listening node did not fire a timer scheduled elsewhere"
    finally:
        firing.close()
        other.close()


def test_a_poison_row_is_quarantined_while_the_others_fire(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    fired: list[str] = []
    with PostgresScheduler(
        postgres_url, table=table, poll_interval=timedelta(milliseconds=200), pool_size=2
    ) as node:
        node.register("h", lambda item, attempt: fired.append(item.id))
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            # A recurrence no flowsched can read (written by hand, or by a buggy version).
            conn.execute(
                f"""INSERT INTO "{table}" (id, generation, kind, handler, route, due,
                    recurrence, scheduled_at)
                VALUES ('poison', 1, 'TIMER', 'h', 'h:h', now(),
                        '{{"cron": "not a cron"}}', now())"""
            )
        now = node.store.now()
        for n in range(5):
            node.schedule(ScheduleItem(f"ok-{n}", TIMER, now, handler="h"))
        node.start()
        assert _wait(lambda: len(fired) == 5), fired
        assert _wait(lambda: not node.exists("poison"))
        [record] = node.store.quarantined()
    assert record.id == "poison" and "recurrence" in record.reason
    assert record.record["recurrence"] == {"cron": "not a cron"}
    assert sorted(fired) == [f"ok-{n}" for n in range(5)]


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"n": 2**64}, "64-bit"),
        ({"n": [-(2**63) - 1]}, "64-bit"),
        ({"s": "a\x00b"}, "NUL"),
    ],
)
def test_payloads_postgres_cannot_keep_exactly_are_refused(
    postgres_url: str, fresh_table: Callable[[], str], payload: dict[str, object], words: str
) -> None:
    with PostgresScheduler(postgres_url, table=fresh_table(), pool_size=1) as node:
        item = ScheduleItem("p", TIMER, node.store.now(), payload=payload)
        with pytest.raises(ValueError, match=words):
            node.schedule(item)
        assert not node.exists("p")
        kept = node.schedule(ScheduleItem("q", TIMER, node.store.now(), payload={"n": 2**63 - 1}))
        assert node.get("q") == kept and kept.payload == {"n": 2**63 - 1}


def test_the_async_face_fires_in_real_time_and_hears_other_nodes(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    import asyncio

    from flowsched import AsyncPostgresScheduler

    table = fresh_table()

    async def main() -> None:
        fired: asyncio.Queue[str] = asyncio.Queue()

        async def handler(item: ScheduleItem, attempt: int) -> None:
            fired.put_nowait(item.id)

        node = AsyncPostgresScheduler(
            postgres_url, table=table, poll_interval=timedelta(seconds=60), pool_size=2
        )
        node.register("a", handler)
        await node.start()
        other = PostgresScheduler(postgres_url, table=table, listen=False, pool_size=1)
        try:
            await node.schedule(ScheduleItem("mine", TIMER, node.now(), handler="a"))
            assert await asyncio.wait_for(fired.get(), 30) == "mine"
            await asyncio.sleep(1.0)  # its listener is connected by now
            due = other.store.now() + timedelta(milliseconds=300)
            await asyncio.to_thread(other.schedule, ScheduleItem("theirs", TIMER, due, handler="a"))
            assert await asyncio.wait_for(fired.get(), 30) == "theirs"
        finally:
            other.close()
            await node.aclose()

    asyncio.run(main())


def test_a_recurring_timer_ticks_once_per_slot_across_two_nodes(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    from flowsched import Recurrence

    table = fresh_table()
    ticks: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(item: ScheduleItem, attempt: int) -> None:
        with lock:
            ticks[item.slot_key] += 1

    nodes = [
        PostgresScheduler(
            postgres_url,
            table=table,
            node_id=f"node-{n}",
            poll_interval=timedelta(milliseconds=100),
            pool_size=2,
        )
        for n in range(2)
    ]
    try:
        for node in nodes:
            node.register("tick", handler)
            node.start()
        nodes[0].schedule_recurring(
            "every-200ms", Recurrence.every(timedelta(milliseconds=200)), handler="tick"
        )
        assert _wait(lambda: len(ticks) >= 8), ticks
    finally:
        for node in nodes:
            node.close()
    assert set(ticks.values()) == {1}, f"a slot ran twice: {ticks.most_common(2)}"


def test_a_started_node_advertises_its_routes_until_it_closes(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    table = fresh_table()
    node = PostgresScheduler(postgres_url, table=table, node_id="beating", pool_size=2)
    node.register("alpha", lambda item, attempt: None)
    node.start()
    store = node.store
    try:
        assert _wait(lambda: [n.node_id for n in store.live_nodes()] == ["beating"])  # type: ignore[attr-defined]
        [live] = store.live_nodes()  # type: ignore[attr-defined]
        assert "h:alpha" in live.routes and live.expires_at > live.renewed_at
    finally:
        node.close()
    with PostgresTimerStore(postgres_url, table=table, pool_size=1) as other:
        assert other.live_nodes() == [], "a closed node is still listed"
