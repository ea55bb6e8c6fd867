"""``flowsched timers cancel`` on a flow's own timer warns that the instance will wait for
ever; ``--flow FLOW_ID`` cancels every timer of the instance."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched import Flow, FlowDomain, SchedulingConfig

CONF = """
Payment.CheckingFraud.CheckFraud.timeout-duration = 5m
Payment.CheckingFraud.CheckFraud.max-retries = 2
"""
PAYMENT = Flow("Payment").initial("CheckingFraud", invokes="CheckFraud").terminal("Done")


@pytest.fixture
def flow_timers(namespace, clock):
    """A Payment instance p-1 on the namespace's scheduler: a timeout and a retry pending."""
    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(namespace.scheduler)
        .with_clock(clock)
        .with_flow(PAYMENT)
        .with_action_adapter("CheckFraud", lambda request: None)
        .build()
    )
    domain.start("Payment", "p-1")
    ids = sorted(doc["_id"] for doc in namespace.collection.find({"flow_id": "p-1"}))
    assert len(ids) == 2
    return ids


def test_cancelling_a_flow_timer_warns_that_the_instance_will_wait_for_ever(
    namespace, flow_timers, timers
):
    code, out, err = timers("cancel", flow_timers[0])

    assert code == 0
    assert out == f"cancelled {flow_timers[0]}\n"
    assert err.startswith(
        f"flowsched: warning: {flow_timers[0]} was a timer of flow Payment, instance p-1: "
        "that instance now waits in its state for ever"
    )
    assert "flowsched timers cancel --flow p-1" in err


def test_cancelling_a_plain_timer_gives_no_warning(namespace, timers):
    namespace.timer("reminder", timedelta(minutes=1), flow_id="p-9")

    assert timers("cancel", "reminder") == (0, "cancelled reminder\n", "")


def test_flow_cancels_every_timer_of_the_instance(namespace, flow_timers, timers):
    namespace.timer("other", timedelta(minutes=1), flow_id="p-2")

    code, out, err = timers("cancel", "--flow", "p-1")

    assert (code, out) == (0, "cancelled 2 timer(s) of flow instance p-1\n")
    assert "stays in its state" in err
    assert namespace.collection.count_documents({"flow_id": "p-1"}) == 0
    assert namespace.collection.count_documents({"_id": "other"}) == 1


def test_flow_without_timers_exits_1(namespace, timers):
    namespace.timer("other", timedelta(minutes=1))

    code, _, err = timers("cancel", "--flow", "p-404")

    assert code == 1
    assert err == "flowsched: error: no timer of flow instance p-404 in flowsched.timers\n"


@pytest.mark.parametrize("args", [[], ["t-1", "--flow", "p-1"]], ids=["neither", "both"])
def test_give_an_id_or_a_flow(namespace, timers, args):
    namespace.timer("t-1", timedelta(minutes=1))

    code, _, err = timers("cancel", *args)

    assert code == 2
    assert err == "flowsched: error: give a timer ID or --flow FLOW_ID (one of them)\n"
