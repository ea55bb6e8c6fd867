"""RetryPolicy: the waits of each backoff type, jitter bounds, and due times cut at the timeout."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from flowsched import ActionPolicy, BackoffType, RetryPolicy, SchedulingConfig

S = timedelta(seconds=1)
M = timedelta(minutes=1)
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_seed_user_defined_10s_30m_with_4_retries() -> None:
    config = SchedulingConfig.from_string(
        """
        Any.CheckingFraud.CheckFraud.max-retries = 4
        Any.CheckingFraud.CheckFraud.backoff-type = "USER_DEFINED"
        Any.CheckingFraud.CheckFraud.custom-backoffs = [10s,30m]
        Any.CheckingFraud.CheckFraud.jitter-enabled = false
        """
    )
    retry = config.action("OBCreditTransfer", "CheckingFraud", "CheckFraud").retry
    assert retry.delays() == [10 * S, 30 * M, 30 * M, 30 * M]
    assert [retry.delay(n) for n in range(1, 5)] == retry.delays()  # no jitter: exact


def test_seed_linear_with_initial_retry_interval_1000() -> None:
    config = SchedulingConfig.from_string(
        """
        Any.CheckingFraud.CheckFraud.initial-retry-interval = 1000
        Any.CheckingFraud.CheckFraud.max-retries = 4
        Any.CheckingFraud.CheckFraud.backoff-type = "LINEAR"
        """
    )
    retry = config.action("OBCreditTransfer", "CheckingFraud", "CheckFraud").retry
    assert retry.delays() == [1 * S, 2 * S, 3 * S, 4 * S]
    assert retry.jitter_enabled  # on by default, so the actual waits vary around these


def test_exponential_from_1s_doubles() -> None:
    retry = RetryPolicy(max_retries=4, initial_interval="1s")
    assert retry.backoff_type is BackoffType.EXPONENTIAL
    assert retry.delays() == [1 * S, 2 * S, 4 * S, 8 * S]


def test_user_defined_repeats_the_last_value_beyond_the_list() -> None:
    retry = RetryPolicy(
        max_retries=6, backoff_type="USER_DEFINED", custom_backoffs=["1s", "2s", "3s"]
    )
    assert retry.delays() == [1 * S, 2 * S, 3 * S, 3 * S, 3 * S, 3 * S]


def test_delays_has_max_retries_waits() -> None:
    assert RetryPolicy().delays() == []
    assert len(RetryPolicy(max_retries=7).delays()) == 7


def test_retry_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        RetryPolicy(max_retries=2).delay(0)


def test_very_late_exponential_waits_saturate_instead_of_overflowing() -> None:
    retry = RetryPolicy(max_retries=80, jitter_enabled=False)
    assert retry.delay(80) == timedelta.max
    assert len(retry.due_times(T0)) < 80  # the ones past the year 9999 are never due


policies = st.builds(
    RetryPolicy,
    max_retries=st.integers(min_value=1, max_value=12),
    initial_interval=st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=2)),
    backoff_type=st.sampled_from([BackoffType.EXPONENTIAL, BackoffType.LINEAR]),
    jitter_enabled=st.just(True),
    jitter_factor=st.floats(min_value=0, max_value=1),
)


@given(policies, st.integers(min_value=1, max_value=12), st.integers())
def test_jitter_stays_within_d_times_one_plus_or_minus_f(
    retry: RetryPolicy, n: int, seed: int
) -> None:
    base = RetryPolicy(**{**retry.model_dump(), "jitter_enabled": False}).delay(n)
    d = Fraction(base // timedelta(microseconds=1))
    f = Fraction(retry.jitter_factor)
    waited = Fraction(retry.delay(n, random.Random(seed)) // timedelta(microseconds=1))
    assert d * (1 - f) <= waited <= d * (1 + f)
    low, high = retry.jitter_range(n)
    assert low <= retry.delay(n, random.Random(seed)) <= high


def test_jitter_actually_varies_and_follows_the_rng() -> None:
    retry = RetryPolicy(max_retries=1, initial_interval="10s")
    draws = {retry.delay(1, random.Random(seed)) for seed in range(50)}
    assert len(draws) > 1
    assert retry.delay(1, random.Random(7)) == retry.delay(1, random.Random(7))
    assert min(draws) >= 8 * S and max(draws) <= 12 * S


def test_without_jitter_the_rng_is_not_used() -> None:
    retry = RetryPolicy(max_retries=1, initial_interval="10s", jitter_enabled=False)
    assert {retry.delay(1, random.Random(seed)) for seed in range(20)} == {10 * S}


def test_retries_are_due_at_the_previous_attempt_plus_the_delay() -> None:
    retry = RetryPolicy(max_retries=4, backoff_type="LINEAR", jitter_enabled=False)
    assert retry.due_times(T0) == [T0 + 1 * S, T0 + 3 * S, T0 + 6 * S, T0 + 10 * S]


def test_a_retry_at_or_after_the_timeout_is_dropped_and_so_are_later_ones() -> None:
    retry = RetryPolicy(max_retries=4, backoff_type="LINEAR", jitter_enabled=False)
    # Due at 1, 3, 6, 10 s: a 6 s timeout keeps 1 and 3 (6 is *at* the deadline).
    assert retry.due_times(T0, timeout=6 * S) == [T0 + 1 * S, T0 + 3 * S]
    assert retry.due_times(T0, timeout=6 * S + timedelta(microseconds=1))[-1] == T0 + 6 * S
    assert retry.due_times(T0, timeout=1 * S) == []


def test_next_due_is_none_past_max_retries_or_the_deadline() -> None:
    retry = RetryPolicy(max_retries=2, jitter_enabled=False)
    assert retry.next_due(1, T0) == T0 + S
    assert retry.next_due(3, T0) is None
    assert retry.next_due(2, T0 + S, deadline=T0 + 3 * S) is None
    assert retry.next_due(2, T0 + S, deadline=T0 + 3 * S + timedelta(microseconds=1)) == (
        T0 + 3 * S
    )


def test_an_action_policy_cuts_its_retries_at_its_own_timeout() -> None:
    config = SchedulingConfig.from_string(
        """
        F.S.A { timeout-duration = 10s, max-retries = 5, jitter-enabled = false }
        """
    )
    policy = config.action("F", "S", "A")
    assert policy.retry_due_times(T0) == [T0 + 1 * S, T0 + 3 * S, T0 + 7 * S]
    assert policy.deadline(T0) == T0 + 10 * S
    assert policy.next_retry_due(4, T0 + 7 * S, first_invocation=T0) is None


def test_without_a_timeout_every_retry_is_due() -> None:
    policy = ActionPolicy(flow="F", state="S", action="A", retry=RetryPolicy(max_retries=3))
    assert policy.deadline(T0) is None
    assert len(policy.retry_due_times(T0, random.Random(1))) == 3


def test_due_times_need_an_aware_start() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        RetryPolicy(max_retries=1).due_times(datetime(2024, 1, 1))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"backoff_type": "USER_DEFINED"}, "needs custom_backoffs"),
        ({"max_retries": -1}, "whole number >= 0"),
        ({"max_retries": True}, "whole number >= 0"),
        ({"jitter_factor": 1.5}, "from 0 to 1"),
        ({"initial_interval": "-1s"}, "negative"),
        ({"custom_backoffs": []}, "must not be empty"),
        ({"backoff_type": "FIBONACCI"}, "EXPONENTIAL, LINEAR, USER_DEFINED"),
    ],
)
def test_an_invalid_policy_cannot_be_built(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RetryPolicy(**fields)  # type: ignore[arg-type]


def test_durations_in_a_policy_follow_hocon_rules() -> None:
    # A bare number is milliseconds, as in the configuration (not pydantic's seconds).
    assert RetryPolicy(initial_interval=1000).initial_interval == S  # type: ignore[arg-type]
    assert RetryPolicy(initial_interval="1.5s").initial_interval == 1500 * timedelta(milliseconds=1)


def test_an_action_policy_validates_its_timeout() -> None:
    assert ActionPolicy("F", "S", "A", timeout="2s").timeout == 2 * S  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        ActionPolicy("F", "S", "A", timeout=-S)
    with pytest.raises(TypeError, match="RetryPolicy"):
        ActionPolicy("F", "S", "A", retry={"max_retries": 1})  # type: ignore[arg-type]


@given(policies, st.integers(min_value=1, max_value=40))
def test_jitter_range_is_every_whole_microsecond_inside_the_exact_bounds(
    retry: RetryPolicy, n: int
) -> None:
    # Bounds of the first retries are worked out once per policy, later ones on demand:
    # both are the exact ceil / floor of d*(1-f) and d*(1+f).
    base = RetryPolicy(**{**retry.model_dump(), "jitter_enabled": False}).delay(n)
    d = Fraction(base // timedelta(microseconds=1))
    f = Fraction(retry.jitter_factor)
    low, high = retry.jitter_range(n)
    most = timedelta.max // timedelta(microseconds=1)  # longer waits saturate
    expected = (math.ceil(d * (1 - f)), min(math.floor(d * (1 + f)), most))
    if expected[0] > expected[1]:
        expected = (int(d), int(d))
    assert (low // timedelta(microseconds=1), high // timedelta(microseconds=1)) == expected
    for seed in range(3):
        assert low <= retry.delay(n, random.Random(seed)) <= high


def test_a_copy_with_other_fields_draws_from_its_own_bounds() -> None:
    retry = RetryPolicy(max_retries=3, initial_interval="10s", jitter_factor=0.1)
    wider = retry.model_copy(update={"jitter_factor": 0.5})
    assert wider.jitter_range(1) == (timedelta(seconds=5), timedelta(seconds=15))
    assert wider == RetryPolicy(max_retries=3, initial_interval="10s", jitter_factor=0.5)
    rng = random.Random(7)
    assert any(wider.delay(1, rng) > timedelta(seconds=11) for _ in range(50))


@pytest.mark.parametrize("text", ["3", " 3 ", "+3", "0", "-1", "2.5", "three", ""])
def test_counts_and_max_retries_read_quoted_numbers_alike(text: str) -> None:
    # One reading of a quoted whole number for the scheduler's counts and max-retries.
    from pyhocon import ConfigFactory

    from flowsched.backoff import parse_max_retries
    from flowsched.config.scheduler_settings import read_scheduler_settings

    tree = ConfigFactory.from_dict({"ipf-scheduler": {"flowsched": {"batch-size": text}}})
    settings, problems = read_scheduler_settings(tree)
    try:
        retries: int | None = parse_max_retries(text)
    except ValueError:
        retries = None
    expected = retries if retries is not None and retries >= 1 else None
    assert (None if problems else settings.batch_size) == expected


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("ipf-scheduler.flowsched.redelivery.factor", "must be a number >= 1"),
        ("Any.Any.Any.jitter-factor", "must be a number from 0 to 1"),
    ],
)
def test_a_number_too_large_for_a_float_is_a_config_error(key: str, message: str) -> None:
    # An integer of 400 digits is valid HOCON; float() of it raised OverflowError.
    from flowsched import ConfigError

    with pytest.raises(ConfigError, match=message):
        SchedulingConfig.from_string(f"{key} = {'1' * 400}")
