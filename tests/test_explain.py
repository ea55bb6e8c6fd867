"""explain: for each type, the value, the winning key (or default) and the shadowed keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowsched import SchedulingConfig
from flowsched.config import ActionType

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "application.conf"


@pytest.fixture(scope="module")
def config() -> SchedulingConfig:
    return SchedulingConfig.from_string(
        """
        Any.Any.Any.timeout-duration = 30s
        Any.CheckingFraud.CheckFraud.timeout-duration = 20s
        OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration = 1h
        ipf.flow.OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration = 2h
        Any.CheckingFraud.CheckFraud.max-retries = 4
        OBCreditTransfer.Any.Any.max-retries = 1
        Any.CheckingFraud.CheckFraud.initial-retry-interval = 1000
        """
    )


def test_every_type_is_explained_in_a_fixed_order(config: SchedulingConfig) -> None:
    explained = config.explain("OBCreditTransfer", "CheckingFraud", "CheckFraud")
    assert [row.type for row in explained.types] == list(ActionType)


def test_the_winner_and_the_shadowed_keys_in_precedence_order(config: SchedulingConfig) -> None:
    row = config.explain("OBCreditTransfer", "CheckingFraud", "CheckFraud")["timeout-duration"]
    assert row.key == "ipf.flow.OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration"
    assert row.text == "2h"
    assert row.shadowed == (
        "OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration",
        "Any.CheckingFraud.CheckFraud.timeout-duration",
        "Any.Any.Any.timeout-duration",
    )


def test_a_type_nobody_sets_comes_from_the_default(config: SchedulingConfig) -> None:
    row = config.explain("OBCreditTransfer", "CheckingFraud", "CheckFraud")["jitter-factor"]
    assert (row.key, row.source, row.value, row.shadowed) == (None, "default", 0.2, ())
    assert config.explain("X", "Y", "Z")["timeout-duration"].text == "30s"
    assert SchedulingConfig.empty().explain("X", "Y", "Z")["timeout-duration"].text == "none"


def test_values_are_shown_as_they_resolve(config: SchedulingConfig) -> None:
    explained = config.explain("OBCreditTransfer", "CheckingFraud", "CheckFraud")
    assert explained["initial-retry-interval"].text == "1s"  # written as 1000 (ms)
    assert explained["backoff-type"].text == "EXPONENTIAL"
    assert explained["max-retries"].key == "Any.CheckingFraud.CheckFraud.max-retries"
    assert explained["max-retries"].shadowed == ("OBCreditTransfer.Any.Any.max-retries",)


def test_explain_agrees_with_the_resolved_policy_on_the_example_file() -> None:
    config = SchedulingConfig.from_file(EXAMPLE)
    for flow, state, action in [
        ("OBCreditTransfer", "CheckingFraud", "CheckFraud"),
        ("OBCreditTransfer", "ValidatingSchemeRules", "ValidateAgainstSchemeRules"),
        ("OtherFlow", "Somewhere", "Something"),
    ]:
        explained = config.explain(flow, state, action)
        policy = config.action(flow, state, action)
        assert explained["timeout-duration"].value == policy.timeout
        assert explained["max-retries"].value == policy.retry.max_retries
        assert explained["backoff-type"].value == policy.retry.backoff_type


def test_printing_an_explanation_gives_a_table(config: SchedulingConfig) -> None:
    text = str(config.explain("OBCreditTransfer", "CheckingFraud", "CheckFraud"))
    lines = text.splitlines()
    assert lines[0] == "OBCreditTransfer.CheckingFraud.CheckFraud"
    assert lines[1].split() == ["type", "value", "from", "shadowed"]
    timeout = next(line for line in lines if line.strip().startswith("timeout-duration"))
    assert "ipf.flow.OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration" in timeout
    assert "Any.Any.Any.timeout-duration" in timeout
    assert any(line.split()[:3] == ["jitter-factor", "0.2", "default"] for line in lines)
