"""The console's queries as data: every page names an index, none skips, cursors round-trip."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from flowsched.console.queries import (
    BadQuery,
    TimerQuery,
    decode_cursor,
    encode_cursor,
    forecast_pipeline,
    prefix_range,
    slots,
)

NOW = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)


def test_the_first_page_walks_the_id_index() -> None:
    spec = TimerQuery().find(NOW)
    assert (spec.filter, spec.sort, spec.hint, spec.limit) == ({}, [("_id", 1)], "_id_", 50)


def test_a_flow_page_reads_flows_in_index_order_and_the_cut_flow_by_id() -> None:
    query = TimerQuery(flow_prefix="order-", limit=20)
    current, following = query.flow_steps(NOW)
    assert current is None
    assert following.sort == [("flow_id", 1)] and following.hint == "flow_id_sparse"
    assert following.filter == {"flow_id": prefix_range("order-")}
    whole = query.flow_whole("order-7", NOW, 5)
    assert (whole.filter, whole.sort, whole.limit) == ({"flow_id": "order-7"}, [("_id", 1)], 5)


def test_a_flow_cursor_continues_its_flow_then_the_next_ones() -> None:
    after = encode_cursor(["order-7", "t-9"])
    current, following = TimerQuery(flow_prefix="order-", after=after).flow_steps(NOW)
    assert current is not None
    assert current.filter == {"flow_id": "order-7", "_id": {"$gt": "t-9"}}
    assert following.filter["flow_id"]["$gt"] == "order-7"


def test_a_cursor_of_another_prefix_is_refused() -> None:
    query = TimerQuery(flow_prefix="order-", after=encode_cursor(["refund-1", "t-1"]))
    with pytest.raises(BadQuery, match="another flow prefix"):
        query.flow_steps(NOW)


def test_prefix_range_is_the_strings_that_start_with_it() -> None:
    span = prefix_range("ab")
    inside = [s for s in ["a", "ab", "ab\x00", "abz", "ab\uffff", "ac", "b"]
              if span["$gte"] <= s < span["$lt"]]  # fmt: skip
    assert inside == ["ab", "ab\x00", "abz", "ab\uffff"]


def test_cursors_round_trip_and_refuse_anything_else() -> None:
    assert decode_cursor(encode_cursor(["a", 3, None]), 3) == ["a", 3, None]
    made_by_hand = base64.urlsafe_b64encode(b"[1.5]").decode()
    for bad, size in [("", 1), ("!!", 1), (encode_cursor(["a"]), 2), (made_by_hand, 1)]:
        with pytest.raises(BadQuery):
            decode_cursor(bad, size)


def test_filters_are_parsed_and_named_when_bad() -> None:
    query = TimerQuery.parse([("kind", "timer"), ("state", "overdue"), ("limit", "10")])
    assert query.kind is not None and query.kind.value == "TIMER" and query.limit == 10
    with pytest.raises(BadQuery, match="state: 'late' is not one of"):
        TimerQuery.parse([("state", "late")])
    with pytest.raises(BadQuery, match="unknown parameter 'skip'"):
        TimerQuery.parse([("skip", "100")])


def test_the_forecast_is_one_bucket_stage_over_24_hourly_slots() -> None:
    boundaries = slots(NOW, "hour", timedelta(hours=24))
    assert boundaries[0] == datetime(2026, 3, 1, 12, tzinfo=UTC) and len(boundaries) == 26
    pipeline = forecast_pipeline(boundaries)
    assert [next(iter(stage)) for stage in pipeline] == ["$match", "$bucket"]
