"""A node whose host clock runs ahead of the server's still fires a timer on time: the next
due time it is told is shifted into its own clock (by the store's ``server_time``), so it
does not wake before the server says due, claim nothing, and wait a whole poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.node.scheduler import NodeScheduler
from flowsched.postgres import PostgresTimerStore

AHEAD = timedelta(milliseconds=80)
POLL = timedelta(seconds=2)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class AheadClock:
    """This host's clock, ``AHEAD`` of the server's (the server runs on this host)."""

    def now(self) -> datetime:
        return datetime.now(UTC) + AHEAD

    def monotonic(self) -> float:
        return time.monotonic()


def test_a_node_ahead_of_the_server_fires_a_timer_well_within_a_poll(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    store = PostgresTimerStore(postgres_url, table=fresh_table(), pool_size=2)
    store.host_clock = AheadClock()  # what the node's driver reads, too
    late: list[float] = []
    fired = threading.Event()

    def handler(item: ScheduleItem, attempt: int) -> None:
        late.append(time.time() - item.due.timestamp())
        fired.set()

    node = NodeScheduler(store, clock=AheadClock(), poll_interval=POLL)
    try:
        node.register("h", handler)
        node.start()
        time.sleep(0.3)  # the node's first claim and next-due have gone: it sleeps a poll
        for n in range(3):
            fired.clear()
            due = store.now() + timedelta(milliseconds=300)
            node.schedule(ScheduleItem(f"t{n}", ScheduleKind.TIMER, due, handler="h"))
            assert fired.wait(10), "never fired"
    finally:
        node.close()
        store.close()
    # Waking on its own clock, the node would claim 80 ms early, find nothing due and
    # wait for its next poll (2 s).
    assert max(late) < POLL.total_seconds() / 2, late
