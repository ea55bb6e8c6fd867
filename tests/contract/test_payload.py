"""Items are validated at the boundary: a JSON payload of at most 1024 bytes, an aware due
time. (That they reach the handler as scheduled is part of ``check_scheduler_port``.)"""

from __future__ import annotations

from datetime import datetime

import pytest

from flowsched import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_a_payload_over_1024_bytes_is_refused_naming_its_size(clock):
    with pytest.raises(ValueError, match=r"1035 bytes.*limit is 1024"):
        ScheduleItem("t", TIMER, clock.now(), payload={"blob": "x" * 1024})


def test_a_payload_that_is_not_json_is_refused(clock):
    with pytest.raises(ValueError, match="JSON"):
        ScheduleItem("t", TIMER, clock.now(), payload={"when": clock.now()})


def test_a_naive_due_time_is_refused(clock):
    with pytest.raises(ValueError, match="timezone-aware"):
        ScheduleItem("t", TIMER, datetime(2026, 1, 1, 12, 0))
