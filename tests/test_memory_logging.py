"""Every log record about an item carries its id and kind (``extra``), for structured logs."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy

START = datetime(2026, 1, 1, tzinfo=UTC)


def test_item_records_carry_item_id_and_kind(caplog):
    clock = ManualClock(START)
    s = InMemoryScheduler(clock=clock, redelivery=RedeliveryPolicy(max_attempts=2))
    s.subscribe(ScheduleKind.TIMER, lambda item, attempt: 1 / 0)
    s.schedule(ScheduleItem("failing", ScheduleKind.TIMER, START))
    s.schedule(ScheduleItem("unhandled", ScheduleKind.ACTION_RETRY, START))
    with caplog.at_level(logging.DEBUG, logger="flowsched"):
        clock.advance(timedelta(0))
        clock.advance(timedelta(seconds=3))
        s.requeue("failing")
        s.cancel("failing")

    records = [r for r in caplog.records if r.name.startswith("flowsched")]
    assert {r.levelname for r in records} >= {"DEBUG", "INFO", "WARNING", "ERROR"}
    for record in records:
        assert record.item_id in {"failing", "unhandled"}, record.getMessage()
        assert record.kind in {"TIMER", "ACTION_RETRY"}, record.getMessage()
    dead = [r for r in records if r.levelname == "ERROR"]
    assert "ZeroDivisionError" in dead[0].getMessage()
