"""Items are validated at the boundary (JSON payload of at most 1024 bytes, aware due
times) and reach the handler as scheduled."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from flowsched import ScheduleItem, ScheduleKind

TIMER = ScheduleKind.TIMER


def test_payload_and_flow_id_reach_the_handler(make_scheduler, clock, recorder, fire):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    payload = {"order": "o-1", "amount": 12.5, "tags": ["a", "é"], "nested": {"n": None}}
    s.schedule(ScheduleItem("t", TIMER, clock.now(), flow_id="flow-1", payload=payload))
    clock.advance(timedelta(0))
    fire(s)

    [delivery] = recorder.deliveries
    assert delivery.item.payload == payload
    assert delivery.item.flow_id == "flow-1"
    assert delivery.item.kind is TIMER


def test_a_payload_over_1024_bytes_is_refused_naming_its_size(clock):
    with pytest.raises(ValueError, match=r"1035 bytes.*limit is 1024"):
        ScheduleItem("t", TIMER, clock.now(), payload={"blob": "x" * 1024})


def test_a_payload_of_exactly_1024_bytes_is_accepted(make_scheduler, clock):
    s = make_scheduler(clock)
    item = ScheduleItem("t", TIMER, clock.now(), payload={"blob": "x" * 1013})
    assert s.schedule(item).payload == {"blob": "x" * 1013}


def test_a_payload_that_is_not_json_is_refused(clock):
    with pytest.raises(ValueError, match="JSON"):
        ScheduleItem("t", TIMER, clock.now(), payload={"when": clock.now()})


def test_a_naive_due_time_is_refused(clock):
    with pytest.raises(ValueError, match="timezone-aware"):
        ScheduleItem("t", TIMER, datetime(2026, 1, 1, 12, 0))


def test_an_aware_due_time_in_another_zone_means_the_same_instant(
    make_scheduler, clock, recorder, fire
):
    s = make_scheduler(clock)
    s.subscribe(TIMER, recorder)
    plus_two = timezone(timedelta(hours=2))
    due = (clock.now() + timedelta(seconds=5)).astimezone(plus_two)
    s.schedule(ScheduleItem("t", TIMER, due))

    clock.advance(timedelta(milliseconds=4999))
    fire(s)
    assert recorder.ids == []
    clock.advance(timedelta(milliseconds=1))
    fire(s)
    assert recorder.ids == ["t"]
