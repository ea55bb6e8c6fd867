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


def test_the_first_page_walks_the_due_index() -> None:
    spec = TimerQuery().find(NOW)
    assert (spec.filter, spec.sort, spec.hint, spec.limit) == (
        {}, [("due", 1), ("_id", 1)], "due_id", 50)  # fmt: skip


def test_a_flow_page_is_a_prefix_range_in_due_order() -> None:
    spec = TimerQuery(flow_prefix="order-", limit=20).find(NOW)
    assert spec.filter == {"flow_id": prefix_range("order-")} and spec.sort[0] == ("due", 1)


def test_after_continues_and_before_goes_back_in_due_order() -> None:
    cursor = encode_cursor([NOW, "t-9"])
    forward = TimerQuery(after=cursor).find(NOW)
    assert forward.filter == {"$or": [{"due": {"$gt": NOW}}, {"due": NOW, "_id": {"$gt": "t-9"}}]}
    back = TimerQuery(before=cursor).find(NOW)
    assert back.sort == [("due", -1), ("_id", -1)]
    assert back.filter == {"$or": [{"due": {"$lt": NOW}}, {"due": NOW, "_id": {"$lt": "t-9"}}]}


@pytest.mark.parametrize(
    "params",
    [
        [("due_from", "9999-12-31T23:59:59-14:00")],
        [("due_to", "0001-01-01T00:00:00+14:00")],
        [("after", "1" * 30)],
        [("after", encode_cursor([NOW, 10**20]))],
        [("after", encode_cursor(["9999-12-31T23:59:59-14:00", "x"]))],
        [("after", encode_cursor([NOW, "x"])), ("before", encode_cursor([NOW, "x"]))],
    ],
)
def test_values_beyond_what_mongodb_holds_are_bad_queries(params: list[tuple[str, str]]) -> None:
    with pytest.raises(BadQuery):
        TimerQuery.parse(params)


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
