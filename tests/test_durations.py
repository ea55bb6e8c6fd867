"""parse_duration: every HOCON duration form, and pyhocon's partial conversion, give one answer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyhocon import ConfigFactory

from flowsched import ConfigError, parse_duration
from flowsched.config import parse_hocon
from flowsched.durations import format_duration

S = timedelta(seconds=1)

VALID = [
    ("2s", 2 * S),
    ("2 s", 2 * S),
    ("1.5s", timedelta(milliseconds=1500)),
    ("2 seconds", 2 * S),
    ("1 second", S),
    ("500ms", timedelta(milliseconds=500)),
    ("10 millis", timedelta(milliseconds=10)),
    ("1 milli", timedelta(milliseconds=1)),
    ("3 milliseconds", timedelta(milliseconds=3)),
    ("1 millisecond", timedelta(milliseconds=1)),
    ("7us", timedelta(microseconds=7)),
    ("7 micros", timedelta(microseconds=7)),
    ("7 micro", timedelta(microseconds=7)),
    ("7 microseconds", timedelta(microseconds=7)),
    ("1 microsecond", timedelta(microseconds=1)),
    ("5000ns", timedelta(microseconds=5)),
    ("5000 nanos", timedelta(microseconds=5)),
    ("5000 nano", timedelta(microseconds=5)),
    ("5000 nanoseconds", timedelta(microseconds=5)),
    ("1000 nanosecond", timedelta(microseconds=1)),
    ("1500ns", timedelta(microseconds=2)),  # rounded to the nearest microsecond
    ("30m", timedelta(minutes=30)),
    ("2 minutes", timedelta(minutes=2)),
    ("1 minute", timedelta(minutes=1)),
    ("2.5 m", timedelta(seconds=150)),
    ("12h", timedelta(hours=12)),
    ("1 hour", timedelta(hours=1)),
    ("2 hours", timedelta(hours=2)),
    ("1d", timedelta(days=1)),
    ("1 day", timedelta(days=1)),
    ("3 days", timedelta(days=3)),
    ("1000", S),  # a string of digits is milliseconds
    ("0", timedelta(0)),
    ("0s", timedelta(0)),
    (".5s", timedelta(milliseconds=500)),
    ("  2s  ", 2 * S),
]
# Accepted as text, though HOCON does not allow "+" in an unquoted value.
TEXT_ONLY = [("+2s", 2 * S), ("+1000", S)]


@pytest.mark.parametrize(("text", "expected"), VALID + TEXT_ONLY)
def test_a_duration_string_converts_exactly(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_the_same_literal_read_by_pyhocon_gives_the_same_answer(
    text: str, expected: timedelta
) -> None:
    unquoted = parse_hocon(f"x = {text.strip()}")["x"]
    quoted = parse_hocon(f'x = "{text.strip()}"')["x"]
    assert parse_duration(unquoted) == expected
    assert parse_duration(quoted) == expected


def test_pyhocon_itself_truncates_nanoseconds_but_the_loader_keeps_the_literal() -> None:
    # The quirk being worked around: pyhocon turns 5ns into no time at all.
    assert parse_duration(ConfigFactory.parse_string("x = 5ns")["x"]) == timedelta(0)
    assert parse_hocon("x = 5ns")["x"] == "5ns"
    assert parse_hocon("x = [10s, 1500 ns]")["x"][1] == "1500 ns"


def test_nanosecond_literals_inside_strings_and_comments_are_left_alone() -> None:
    tree = parse_hocon('a = "x 5ns" # 7ns\nb = 2s // 9ns\nc = 0.5ns\nd.5ns = 1')
    assert tree["a"] == "x 5ns"
    assert parse_duration(tree["b"]) == 2 * S
    assert tree["c"] == "0.5ns"
    assert tree["d"]["5ns"] == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1000, S),
        (0, timedelta(0)),
        (1.5, timedelta(microseconds=1500)),  # a bare number is milliseconds, even a decimal
        (2 * S, 2 * S),
        (timedelta(0), timedelta(0)),
    ],
)
def test_numbers_are_milliseconds_and_timedeltas_pass_through(
    value: object, expected: timedelta
) -> None:
    assert parse_duration(value) == expected


def test_pyhocon_values_of_every_kind_agree_with_the_text() -> None:
    tree = parse_hocon("a = 1000\nb = 1.5\nc = 2s\nd = 1.5s\ne = -2s\nf = 1e3")
    assert isinstance(tree["a"], int) and isinstance(tree["b"], float)
    # c is a timedelta, or a relativedelta where python-dateutil is installed
    assert not isinstance(tree["c"], str) and isinstance(tree["d"], str)
    assert parse_duration(tree["a"]) == parse_duration("1000") == S
    assert parse_duration(tree["b"]) == parse_duration("1.5") == timedelta(microseconds=1500)
    assert parse_duration(tree["c"]) == parse_duration("2s")
    assert parse_duration(tree["d"]) == parse_duration("1.5s")
    assert parse_duration(tree["f"]) == parse_duration("1e3") == S
    with pytest.raises(ConfigError):
        parse_duration(tree["e"])


@pytest.mark.parametrize(
    ("value", "shown", "reason"),
    [
        ("-2s", '"-2s"', "negative"),
        (-5, "-5", "negative"),
        (timedelta(seconds=-1), "-1s", "negative"),
        ("", '""', "empty"),
        ("   ", '"   "', "empty"),
        ("2 fortnights", '"2 fortnights"', "unknown unit 'fortnights'"),
        ("2S", '"2S"', "unknown unit 'S'"),
        ("2 SECONDS", '"2 SECONDS"', "unknown unit 'SECONDS'"),
        ("1mo", '"1mo"', "unknown unit 'mo'"),
        ("soon", '"soon"', "not a duration"),
        ("1s 2s", '"1s 2s"', "not a duration"),
        (True, "true", "boolean"),
        (None, "null", "expected a duration"),
        ([1, 2], "[1, 2]", "expected a duration"),
        (float("nan"), "nan", "not a finite number"),
        ("5ns", '"5ns"', "shorter than 1 microsecond"),
        ("0.4us", '"0.4us"', "shorter than 1 microsecond"),
        ("99999999999d", '"99999999999d"', "too long"),
    ],
)
def test_a_bad_duration_names_the_key_and_the_value(value: object, shown: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_duration(value, key="Flow1.State1.Action1.timeout-duration")
    message = str(caught.value)
    assert message.startswith(f"Flow1.State1.Action1.timeout-duration = {shown}: ")
    assert reason in message
    (problem,) = caught.value.problems
    assert problem.key == "Flow1.State1.Action1.timeout-duration"
    assert problem.value == shown


def test_an_unknown_unit_error_says_what_is_valid() -> None:
    with pytest.raises(ConfigError, match="ns, us, ms, s, m, h, d"):
        parse_duration("3 fortnights")


def test_without_a_key_the_message_still_names_the_value() -> None:
    with pytest.raises(ConfigError, match=r'^"-2s": a duration cannot be negative'):
        parse_duration("-2s")


@given(st.timedeltas(min_value=timedelta(0)))
def test_format_duration_gives_text_that_parses_back_to_the_same_duration(
    value: timedelta,
) -> None:
    assert parse_duration(format_duration(value)) == value


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["ms", "s", "m", "h", "d"]))
def test_integer_amounts_agree_with_timedelta(amount: int, unit: str) -> None:
    size = {
        "ms": timedelta(milliseconds=1),
        "s": S,
        "m": timedelta(minutes=1),
        "h": timedelta(hours=1),
        "d": timedelta(days=1),
    }[unit]
    try:
        expected = amount * size
    except OverflowError:
        with pytest.raises(ConfigError, match="too long"):
            parse_duration(f"{amount}{unit}")
        return
    assert parse_duration(f"{amount}{unit}") == expected
    assert parse_duration(f"{amount} {unit}") == expected
