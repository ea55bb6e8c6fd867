"""Fuzzed input: config text, durations, items and payloads either work or are refused with
FlowschedError / ValueError / TypeError - never any other exception (section 10)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowsched import FlowschedError, ScheduleItem, ScheduleKind, SchedulingConfig, parse_duration

EXPECTED = (FlowschedError, ValueError, TypeError)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces HOCON is made of, so random text reaches deep into the parser, not just its first
# character.
TOKENS = st.sampled_from(
    [
        "{", "}", "[", "]", "=", ":", ",", ".", "\n", " ", '"', '"""', "${", "${?", "#", "//",
        "+=", "include ", "Any", "F", "S", "A", "ipf", "flow", "processing-time",
        "timeout-duration", "max-retries", "backoff-type", "custom-backoffs", "jitter-factor",
        "jitter-enabled", "initial-retry-interval", "offset-id", "ipf-scheduler", "mongodb",
        "poll-interval", "max-attempts", "EXPONENTIAL", "USER_DEFINED", "true", "null", "1",
        "-1", "0.5", "1e999", "99999999999999", "2s", "5ns", "3 days", "1.5 h", "é", "\\",
        "\x00", "\ud800",
    ]
)  # fmt: skip
HOCON = st.lists(TOKENS | st.text(max_size=5), max_size=60).map("".join)


@FUZZ
@given(HOCON)
def test_config_text_raises_only_flowsched_or_value_errors(text: str) -> None:
    with contextlib.suppress(EXPECTED):
        SchedulingConfig.from_string(text)


@FUZZ
@given(st.binary(max_size=200))
def test_config_files_of_any_bytes_raise_only_flowsched_or_value_errors(
    tmp_path_factory: Any, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "application.conf"
    path.write_bytes(data)
    with contextlib.suppress(EXPECTED):
        SchedulingConfig.from_file(path)


NUMBERS = st.from_regex(r"[+-]?[0-9]{0,400}(\.[0-9]{0,400})?([eE][+-]?[0-9]{1,4})?", fullmatch=True)
UNITS = st.sampled_from(["", "ns", "us", "ms", "s", "m", "h", "d", "days", "w", "x", " s"])
DURATIONS = (
    st.text(max_size=30)
    | st.builds(lambda n, u: n + u, NUMBERS, UNITS)
    | st.integers()
    | st.floats()
    | st.none()
    | st.booleans()
    | st.timedeltas()
)


@FUZZ
@given(DURATIONS)
def test_durations_raise_only_config_errors(value: object) -> None:
    with contextlib.suppress(EXPECTED):
        parse_duration(value, key="Any.Any.Any.timeout-duration")


JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=30,
)


def nest(depth: int, leaf: Any) -> dict[str, Any]:
    value: Any = leaf
    for n in range(depth):
        value = {"k": value} if n % 2 else [value]
    return {"root": value}


PAYLOADS = (
    st.dictionaries(st.text(max_size=5), JSON, max_size=5)
    | st.builds(nest, st.integers(0, 3000), JSON)
    | JSON
)
OFFSETS = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
DUES = st.datetimes(timezones=st.none() | st.just(UTC) | OFFSETS) | st.integers() | st.none()
IDS = st.text(max_size=40) | st.text(min_size=1000, max_size=1100) | st.integers() | st.none()


@FUZZ
@given(IDS, st.sampled_from([*ScheduleKind, "NOPE", None]), DUES, IDS | st.none(), PAYLOADS, IDS)
def test_items_raise_only_value_or_type_errors(
    item_id: Any, kind: Any, due: Any, flow_id: Any, payload: Any, handler: Any
) -> None:
    with contextlib.suppress(EXPECTED):
        ScheduleItem(item_id, kind, due, flow_id, payload, handler=handler)


@FUZZ
@given(PAYLOADS)
def test_payloads_raise_only_value_or_type_errors(payload: Any) -> None:
    with contextlib.suppress(EXPECTED):
        ScheduleItem("t", ScheduleKind.TIMER, datetime(2026, 1, 1, tzinfo=UTC), payload=payload)
