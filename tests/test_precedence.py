"""Each type is resolved on its own over the eight precedence levels.

1. Flow1.State1.Action1   2. Any.State1.Action1   3. Flow1.Any.Action1   4. Any.Any.Action1
5. Flow1.State1.Any       6. Any.State1.Any       7. Flow1.Any.Any       8. Any.Any.Any
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from flowsched import SchedulingConfig
from flowsched.config import precedence

LEVELS = {
    1: "Flow1.State1.Action1",
    2: "Any.State1.Action1",
    3: "Flow1.Any.Action1",
    4: "Any.Any.Action1",
    5: "Flow1.State1.Any",
    6: "Any.State1.Any",
    7: "Flow1.Any.Any",
    8: "Any.Any.Any",
}
PAIRS = list(itertools.combinations(LEVELS, 2))  # (higher, lower): 28 pairs


def resolve(lines: list[str]) -> SchedulingConfig:
    return SchedulingConfig.from_string("\n".join(lines))


def test_precedence_lists_the_eight_levels_in_order() -> None:
    expected = [tuple(LEVELS[level].split(".")) for level in LEVELS]
    assert precedence("Flow1", "State1", "Action1") == expected


@pytest.mark.parametrize(("higher", "lower"), PAIRS, ids=lambda n: f"L{n}")
def test_a_level_wins_max_retries_against_every_lower_level(higher: int, lower: int) -> None:
    config = resolve(
        [f"{LEVELS[lower]}.max-retries = {lower}", f"{LEVELS[higher]}.max-retries = {higher}"]
    )
    assert config.action("Flow1", "State1", "Action1").retry.max_retries == higher


@pytest.mark.parametrize(("higher", "lower"), PAIRS, ids=lambda n: f"L{n}")
def test_a_level_wins_timeout_duration_against_every_lower_level(higher: int, lower: int) -> None:
    # Written in the opposite order to the previous test: file order does not matter.
    config = resolve(
        [
            f"{LEVELS[higher]}.timeout-duration = {higher}s",
            f"{LEVELS[lower]}.timeout-duration = {lower}s",
        ]
    )
    assert config.action("Flow1", "State1", "Action1").timeout == timedelta(seconds=higher)


@pytest.mark.parametrize("removed", list(LEVELS))
def test_with_every_level_set_the_most_specific_remaining_one_wins(removed: int) -> None:
    present = [level for level in LEVELS if level != removed]
    config = resolve([f"{LEVELS[level]}.max-retries = {level}" for level in present])
    assert config.action("Flow1", "State1", "Action1").retry.max_retries == min(present)


def test_a_level_can_win_max_retries_and_lose_timeout_duration() -> None:
    config = resolve(
        [
            "Any.State1.Action1.max-retries = 3",  # level 2: sets only max-retries
            "Flow1.Any.Action1.timeout-duration = 7s",  # level 3
            "Flow1.Any.Action1.max-retries = 9",  # level 3: loses max-retries to level 2
            "Any.Any.Any.backoff-type = LINEAR",  # level 8: nobody else sets it
        ]
    )
    policy = config.action("Flow1", "State1", "Action1")
    assert policy.retry.max_retries == 3
    assert policy.timeout == timedelta(seconds=7)
    assert policy.retry.backoff_type == "LINEAR"
    explained = config.explain("Flow1", "State1", "Action1")
    assert explained["max-retries"].key == "Any.State1.Action1.max-retries"
    assert explained["timeout-duration"].key == "Flow1.Any.Action1.timeout-duration"


def test_keys_of_other_flows_states_and_actions_do_not_apply() -> None:
    config = resolve(
        [
            "Flow2.State1.Action1.max-retries = 1",
            "Flow1.State2.Action1.max-retries = 2",
            "Flow1.State1.Action2.max-retries = 3",
            "Any.Any.Action2.max-retries = 4",
            "Any.Any.Any.max-retries = 8",
        ]
    )
    assert config.action("Flow1", "State1", "Action1").retry.max_retries == 8
    assert config.action("Flow1", "State1", "Action2").retry.max_retries == 3
    assert config.action("Flow9", "State9", "Action2").retry.max_retries == 4


def test_nothing_configured_gives_the_defaults() -> None:
    policy = SchedulingConfig.empty().action("Flow1", "State1", "Action1")
    assert policy.timeout is None
    retry = policy.retry
    assert (retry.max_retries, retry.initial_interval, retry.backoff_type) == (
        0,
        timedelta(seconds=1),
        "EXPONENTIAL",
    )
    assert (retry.custom_backoffs, retry.jitter_enabled, retry.jitter_factor) == (None, True, 0.2)


def test_the_ipf_flow_form_wins_over_the_same_key_at_the_root() -> None:
    config = resolve(
        [
            "Flow1.State1.Action1.max-retries = 1",
            "ipf.flow.Flow1.State1.Action1.max-retries = 2",
        ]
    )
    assert config.action("Flow1", "State1", "Action1").retry.max_retries == 2
    explained = config.explain("Flow1", "State1", "Action1")["max-retries"]
    assert explained.key == "ipf.flow.Flow1.State1.Action1.max-retries"
    assert explained.shadowed == ("Flow1.State1.Action1.max-retries",)


def test_the_ipf_flow_form_alone_configures_an_action() -> None:
    config = resolve(["ipf.flow { Any.Any.Action1 { timeout-duration = 4s } }"])
    assert config.action("Flow1", "State1", "Action1").timeout == timedelta(seconds=4)


def test_a_more_specific_level_beats_a_less_specific_one_whatever_its_form() -> None:
    # The form decides only between the same key; the level decides between levels.
    config = resolve(
        [
            "Flow1.State1.Action1.max-retries = 1",
            "ipf.flow.Any.Any.Any.max-retries = 8",
        ]
    )
    assert config.action("Flow1", "State1", "Action1").retry.max_retries == 1


def test_a_resolved_policy_is_cached_and_shared() -> None:
    config = resolve(["Any.Any.Any.max-retries = 2"])
    first = config.action("Flow1", "State1", "Action1")
    assert config.action("Flow1", "State1", "Action1") is first
    assert config.action("Flow1", "State1", "Action2") is not first
