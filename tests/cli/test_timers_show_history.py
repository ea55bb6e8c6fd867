"""``flowsched timers show ID`` prints the item's delivery history (CONTRACT section 18),
also once the timer is gone; ``--json`` gives it as ``history``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from timers_kit import run

from flowsched.cli.mongo_target import MongoTarget
from flowsched.cli.timers_commands import TimersCli
from flowsched.clock import ManualClock
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

mongomock = pytest.importorskip("mongomock")

S = timedelta(seconds=1)


@pytest.fixture
def setup() -> Iterator[tuple[MongoScheduler, Any]]:
    # Near the wall clock: mongomock applies the history's TTL index by it.
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    client = mongomock.MongoClient(tz_aware=True)
    scheduler = MongoScheduler(client["flowsched"]["timers"], node_id="node-a", clock=clock)

    def handler(item: ScheduleItem, attempt: int) -> None:
        if attempt < 2:
            raise ConnectionError(f"gateway down #{attempt}")

    scheduler.register("pay", handler)
    scheduler.start()

    @contextmanager
    def connect(target: MongoTarget) -> Iterator[Any]:
        yield client[target.db]

    app = TimersCli(connect=connect, clock=clock).app()
    scheduler.schedule(ScheduleItem("pay-1", ScheduleKind.TIMER, clock.now(), handler="pay"))
    clock.advance(5 * S)  # failed at 0 s and 3 s; scheduled again for 9 s
    yield scheduler, lambda *args: run(app, list(args))
    scheduler.close()


def test_show_prints_the_attempts_under_the_fields(setup) -> None:
    _, timers = setup
    code, out, err = timers("show", "pay-1")
    assert (code, err) == (0, "")
    history = out[out.index("history") :]
    assert history.count("failed") == 2
    assert "node-a" in history
    assert "ConnectionError: gateway down #0" in history
    assert "gateway down #1" in history
    assert "latest traceback" in out and 'raise ConnectionError(f"gateway down' in out


def test_show_prints_the_history_of_a_timer_that_is_gone(setup) -> None:
    scheduler, timers = setup
    scheduler._clock.advance(10 * S)  # the third attempt succeeds: the timer is gone
    assert not scheduler.exists("pay-1")

    code, out, _ = timers("show", "pay-1")
    assert code == 0
    assert "no longer scheduled" in out
    assert "succeeded" in out

    code, out, _ = timers("show", "pay-1", "--json")
    shown = json.loads(out)
    assert [a["outcome"] for a in shown["history"]] == ["failed", "failed", "succeeded"]
    assert shown["history"][0]["error_message"] == "gateway down #0"
    assert shown["history"][0]["node"] == "node-a"
