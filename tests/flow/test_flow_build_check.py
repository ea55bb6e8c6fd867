"""build() catches configuration keys that name no registered flow, state or action."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from flowkit import T0, HarnessFactory, credit_transfer

from flowsched import (
    ActionTimeoutEvent,
    AsyncInMemoryScheduler,
    ConfigError,
    Flow,
    InMemoryScheduler,
    ManualClock,
    SchedulingConfig,
)
from flowsched.flow import FlowConfigError, FlowDomain

TYPO = "Any.CheckingFruad.CheckFraud.timeout-duration = 20s"


def test_a_config_naming_a_state_the_flow_does_not_have_is_refused(
    harness: HarnessFactory,
) -> None:
    with pytest.raises(FlowConfigError) as caught:
        harness(TYPO)

    assert isinstance(caught.value, ConfigError)
    assert len(caught.value.problems) == 1
    problem = str(caught.value.problems[0])
    assert problem.startswith("Any.CheckingFruad.CheckFraud.timeout-duration: no state")
    assert "did you mean 'CheckingFraud'?" in problem
    assert "CheckingFruad" in str(caught.value)


def test_a_misspelt_processing_time_state_is_refused(harness: HarnessFactory) -> None:
    pt = "ipf.flow.OBCreditTransfer.processing-time"
    conf = f"{pt}.ValidatingSchemeRules.Completed.timeout-duration = 2s"

    with pytest.raises(FlowConfigError, match="no destination state 'Completed'"):
        harness(conf)


def test_with_the_warn_option_the_problem_is_logged_and_the_domain_built(
    harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="flowsched.flow"):
        h = harness(TYPO, config_check="warn")

    assert h.domain is not None
    assert "CheckingFruad" in caplog.text


def test_keys_for_flows_that_exist_pass(harness: HarnessFactory) -> None:
    conf = """
    Any.CheckingFraud.CheckFraud.timeout-duration = 20s
    OBCreditTransfer.Any.Any.max-retries = 1
    ipf.flow.OBCreditTransfer.processing-time.ValidatingSchemeRules.Complete.timeout-duration = 2s
    """

    assert harness(conf).domain is not None


def test_an_action_without_an_adapter_is_refused() -> None:
    builder = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(""))
        .with_scheduler_adapter(InMemoryScheduler(clock=ManualClock(T0)))
        .with_flow(credit_transfer())
        .with_action_adapter("CheckFraud", lambda request: None)
    )

    with pytest.raises(
        ValueError, match=r"no action adapter for OBCreditTransfer\.ValidateAgainstSchemeRules"
    ):
        builder.build()


def test_building_without_a_scheduler_adapter_says_what_to_call() -> None:
    builder = FlowDomain.builder().with_config(SchedulingConfig.from_string(""))

    with pytest.raises(ValueError, match=r"with_scheduler_adapter"):
        builder.with_flow(credit_transfer()).build()


def test_other_libraries_keys_in_the_same_file_do_not_stop_the_build(
    harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    conf = """
    alpakka.s3.retry-settings { max-retries = 3, min-backoff = 200ms, max-backoff = 10s }
    storage.s3.retry-settings { max-retries = 3, min-backoff = 200ms, max-backoff = 10s }
    Any.CheckingFraud.CheckFraud.max-retries = 1
    """
    with caplog.at_level(logging.DEBUG, logger="flowsched.flow"):
        h = harness(conf)

    assert h.domain is not None
    # alpakka is a known library block, never read; storage has the shape of a root action
    # key of a flow "storage", which no flow is: logged as not ours.
    assert any("storage.s3.retry-settings.max-retries" in r.message for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_root_key_of_a_registered_flow_that_does_not_fit_is_refused(
    harness: HarnessFactory,
) -> None:
    conf = """
    OBCreditTransfer.CheckingFraud.timeout-duration = 2s
    obcredittransfer.CheckingFraud.CheckFraud.retries = 2
    Kafka.Consumer.Group.retries = 3
    """

    with pytest.raises(FlowConfigError) as caught:
        harness(conf)

    shown = {p.key: str(p) for p in caught.value.problems}
    assert set(shown) == {
        "OBCreditTransfer.CheckingFraud.timeout-duration",
        "obcredittransfer.CheckingFraud.CheckFraud.retries",
    }  # Kafka is no registered flow: somebody else's key
    assert (
        "did you mean OBCreditTransfer.CheckingFraud.Any.timeout-duration?"
        in shown["OBCreditTransfer.CheckingFraud.timeout-duration"]
    )


def test_a_misspelt_state_is_suggested_whatever_its_case(harness: HarnessFactory) -> None:
    with pytest.raises(FlowConfigError, match="did you mean 'CheckingFraud'"):
        harness("Any.checkingfraud.CheckFraud.timeout-duration = 20s")


def _unconfigured_payment() -> Flow:
    return (
        Flow("Payment")
        .initial("CheckingFraud", invokes="CheckFraud")
        .terminal("Approved")
        .on(ActionTimeoutEvent, in_state="CheckingFraud", action="CheckFraud", go_to="Approved")
    )


def test_without_with_config_the_domain_builds_and_its_actions_have_no_timeouts() -> None:
    clock = ManualClock(T0)
    with InMemoryScheduler(clock=clock) as scheduler:
        domain = (
            FlowDomain.builder()
            .with_scheduler_adapter(scheduler)
            .with_clock(clock)
            .with_flow(_unconfigured_payment())
            .with_action_adapter("CheckFraud", lambda request: None)
            .build()
        )
        domain.start("Payment", "p-1")
        assert domain.timers("p-1") == []
        clock.advance(timedelta(days=30))
        instance = domain.instance("p-1")
        assert instance is not None and instance.state == "CheckingFraud"


def test_without_with_config_build_async_builds_a_domain_with_no_timeouts() -> None:
    async def scenario() -> None:
        clock = ManualClock(T0)
        async with AsyncInMemoryScheduler(clock=clock) as scheduler:
            domain = (
                FlowDomain.builder()
                .with_scheduler_adapter(scheduler)
                .with_clock(clock)
                .with_flow(_unconfigured_payment())
                .with_action_adapter("CheckFraud", lambda request: None)
                .build_async()
            )
            await domain.start("Payment", "p-1")
            assert await domain.timers("p-1") == []
            await clock.advance_async(timedelta(days=30))
            instance = await domain.instance("p-1")
            assert instance is not None and instance.state == "CheckingFraud"

    asyncio.run(scenario())
