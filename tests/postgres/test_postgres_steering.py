"""Steering timers from Python on PostgreSQL (CONTRACT section 18): ``timers()`` pages soonest
due first with filters, ``pause`` keeps a timer from firing until ``resume``, ``history``
lists the attempts with their outcomes and errors - through the scheduler's own calls."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from flowsched import ManualClock, PostgresScheduler, ScheduleItem, ScheduleKind

START = datetime(2026, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)


def test_timers_pause_resume_and_history(postgres_url: str, fresh_table: Callable[[], str]) -> None:
    clock = ManualClock(START)
    fired: list[str] = []

    def handler(item: ScheduleItem, attempt: int) -> None:
        if item.id == "flaky" and attempt == 0:
            raise RuntimeError("first try fails")
        fired.append(item.id)

    with PostgresScheduler(postgres_url, table=fresh_table(), clock=clock) as scheduler:
        scheduler.register("h", handler)
        for n in range(5):
            scheduler.schedule(
                ScheduleItem(f"t-{n}", ScheduleKind.TIMER, START + (5 - n) * S, handler="h")
            )
        scheduler.schedule(ScheduleItem("flaky", ScheduleKind.TIMER, START + S, handler="h"))

        page = scheduler.timers(id_prefix="t-", limit=2)
        assert [info.id for info in page.items] == ["t-4", "t-3"] and page.next is not None
        rest = scheduler.timers(id_prefix="t-", limit=10, after=page.next)
        assert [info.id for info in rest.items] == ["t-2", "t-1", "t-0"] and rest.next is None
        assert [i.id for i in scheduler.iter_timers(id_prefix="t-")] == [
            "t-4",
            "t-3",
            "t-2",
            "t-1",
            "t-0",
        ]

        assert scheduler.pause("t-0") is True and scheduler.pause("nope") is False
        assert [i.id for i in scheduler.timers(state="paused").items] == ["t-0"]
        clock.advance(10 * S)  # flaky fails once and is redelivered 3 s later
        assert "t-0" not in fired and scheduler.exists("t-0")
        assert scheduler.resume("t-0") is True
        clock.advance(S)
        assert sorted(fired) == ["flaky", "t-0", "t-1", "t-2", "t-3", "t-4"]

        history = scheduler.history("flaky")
        assert [(a.attempt, a.outcome, a.error_type) for a in history] == [
            (0, "failed", "RuntimeError"),
            (1, "succeeded", None),
        ]
        assert history[0].started == START + S and history[0].node == scheduler.node_id
        assert scheduler.timers().items == []
