"""Processing-time limits: ipf.flow.<flow>.processing-time.<source>.<destination>.<type>."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched import ConfigError, ProcessingTimePolicy, SchedulingConfig

CONF = """
ipf.flow.OBCreditTransfer.processing-time.ValidatingSchemeRules.Complete.timeout-duration = 2s
ipf.flow.OBCreditTransfer.processing-time.ValidatingSchemeRules.Complete.offset-id = anOffsetId
ipf.flow.OBCreditTransfer.processing-time {
  ValidatingSchemeRules.CheckingFraud.timeout-duration = 1500
  CheckingFraud.Complete { timeout-duration = 1h }
}
ipf.flow.OtherFlow.processing-time.ValidatingSchemeRules.Complete.timeout-duration = 9s
"""


@pytest.fixture(scope="module")
def config() -> SchedulingConfig:
    return SchedulingConfig.from_string(CONF)


def test_a_limit_has_its_timeout_and_offset_id(config: SchedulingConfig) -> None:
    policy = config.processing_time("OBCreditTransfer", "ValidatingSchemeRules", "Complete")
    assert policy == ProcessingTimePolicy(
        flow="OBCreditTransfer",
        source="ValidatingSchemeRules",
        destination="Complete",
        timeout=timedelta(seconds=2),
        offset_id="anOffsetId",
    )


def test_without_offset_id_the_limit_counts_from_entering_the_source(
    config: SchedulingConfig,
) -> None:
    policy = config.processing_time("OBCreditTransfer", "CheckingFraud", "Complete")
    assert policy is not None
    assert policy.offset_id is None
    assert policy.timeout == timedelta(hours=1)
    entered = datetime(2024, 1, 1, tzinfo=UTC)
    assert policy.deadline(entered) == entered + timedelta(hours=1)


def test_a_bare_number_is_milliseconds_here_too(config: SchedulingConfig) -> None:
    policy = config.processing_time("OBCreditTransfer", "ValidatingSchemeRules", "CheckingFraud")
    assert policy is not None and policy.timeout == timedelta(milliseconds=1500)


def test_an_unconfigured_pair_has_no_limit(config: SchedulingConfig) -> None:
    assert config.processing_time("OBCreditTransfer", "Complete", "ValidatingSchemeRules") is None
    assert config.processing_time("NoSuchFlow", "ValidatingSchemeRules", "Complete") is None


def test_all_limits_from_a_source_keyed_by_destination(config: SchedulingConfig) -> None:
    limits = config.processing_times_from("OBCreditTransfer", "ValidatingSchemeRules")
    assert sorted(limits) == ["CheckingFraud", "Complete"]
    assert limits["Complete"].timeout == timedelta(seconds=2)
    assert dict(config.processing_times_from("OBCreditTransfer", "Complete")) == {}


def test_limits_belong_to_their_flow(config: SchedulingConfig) -> None:
    other = config.processing_time("OtherFlow", "ValidatingSchemeRules", "Complete")
    assert other is not None and other.timeout == timedelta(seconds=9)


def test_processing_time_keys_are_not_action_keys(config: SchedulingConfig) -> None:
    assert config.action_keys() == ()
    assert config.action("OBCreditTransfer", "processing-time", "Complete").timeout is None
    keys = {(k.flow, k.source, k.destination, k.type.value) for k in config.processing_time_keys()}
    assert ("OBCreditTransfer", "ValidatingSchemeRules", "Complete", "offset-id") in keys
    assert len(keys) == 5


def test_an_offset_id_without_a_timeout_is_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        SchedulingConfig.from_string("ipf.flow.F.processing-time.A.B.offset-id = x")
    (problem,) = caught.value.problems
    assert problem.key == "ipf.flow.F.processing-time.A.B.offset-id"
    assert "without a timeout-duration" in problem.message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("timeout-duration = -2s", 'timeout-duration = "-2s": a duration cannot be negative'),
        ("timeout-duration = never", 'timeout-duration = "never": not a duration'),
        ("offset-id = 12", "offset-id = 12: must be a non-empty string"),
        ('offset-id = ""', 'offset-id = "": must be a non-empty string'),
    ],
)
def test_a_bad_processing_time_value_names_key_and_value(line: str, expected: str) -> None:
    prefix = "ipf.flow.F.processing-time.A.B."
    text = f"{prefix}timeout-duration = 1s\n{prefix}{line}"
    with pytest.raises(ConfigError) as caught:
        SchedulingConfig.from_string(text)
    assert str(caught.value.problems[0]).startswith(prefix + expected)
