"""A flow instance on MongoDB, start to completion: a fixed number of round trips on the
timers (five: three schedules, then a find and a delete), plus three deletes of dead
letters, each in its schedule's command on MongoDB 8.0+ (else one command each).

Counted with pymongo's command monitoring on the wire server: the scheduler's timers and the
flow store's instances share one monitored client. Reaching the terminal state cancels every
timer of the instance with one ``cancel_flow`` (no single cancels before it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from commands import Commands, bulk_write_capable, monitored_database, statements

from flowsched import FlowDomain, ManualClock, SchedulingConfig
from flowsched.flow import ActionRequest, Flow
from flowsched.mongo import MongoScheduler
from flowsched.mongo.flow_store import MongoFlowStore

pytestmark = pytest.mark.wire

CONF = """
Payment.Sending.Send.timeout-duration = 30s
Payment.Sending.Send.max-retries = 2
ipf.flow.Payment.processing-time.Sending.Done.timeout-duration = 1m
"""


@dataclass(frozen=True)
class Sent:
    """The completing answer to Send."""


@pytest.fixture
def counted(mongo_uri: str) -> Iterator[tuple[Any, Commands]]:
    with monitored_database(mongo_uri, "fs_flow_rt") as monitored:
        yield monitored


def timers(seen: Counter[tuple[str, str]]) -> Counter[str]:
    return Counter({name: n for (name, collection), n in seen.items() if collection == "timers"})


def payment() -> Flow:
    return (
        Flow("Payment")
        .initial("Sending", invokes="Send")
        .terminal("Done")
        .response(Sent, to="Send")
        .on(Sent, in_state="Sending", go_to="Done")
    )


def test_an_instance_costs_a_fixed_number_of_round_trips_from_start_to_completion(counted):
    database, commands = counted
    clock = ManualClock(datetime.now(UTC))
    scheduler = MongoScheduler(database["timers"], clock=clock)
    store = MongoFlowStore(database["instances"])
    requests: list[ActionRequest] = []
    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(CONF))
        .with_scheduler_adapter(scheduler)
        .with_flow_store(store)
        .with_clock(clock)
        .with_flow(payment())
        .with_action_adapter("Send", requests.append)
        .build()
    )
    scheduler.exists("warm-up")  # index creation is not part of an instance's cost
    together = 3 if bulk_write_capable(database) else 0  # the schedules' bulkWrites
    commands.take_on()

    domain.start("Payment", "p-1")
    assert [r.action for r in requests] == ["Send"]
    sent = commands.take()
    started = Counter((name, on) for name, on, _ in sent)
    # The Send timeout, its first retry and the Sending->Done deadline: one upsert each (an
    # update that replaces no running form; one that would, a findAndModify reading it back
    # for the history), and one delete each of a dead letter of that id (a schedule
    # supersedes it), after it in the same client-level bulkWrite where the server has it
    # (MongoDB 8.0+, the wire server; else a command of its own).
    writes = Counter(statements(sent))
    assert writes[("update", "timers")] == writes[("delete", "timers_dead")] == 3
    assert writes[("insert", "instances")] == 1
    assert started[("bulkWrite", "1")] == together
    assert timers(started)["update"] == started[("delete", "timers_dead")] == 3 - together
    schedules = timers(started)["update"] + started[("bulkWrite", "1")]
    assert database["timers"].count_documents({"flow_id": "p-1"}) == 3
    commands.take_on()  # that count is the test's, not the instance's

    domain.handle("p-1", Sent())
    finished = commands.take_on()
    # Sent completes Send (its timeout and retry go) and reaches Done (everything goes):
    # one cancel_flow, no single cancels: one find of the flow's timers, then one bulk
    # delete of them, each fenced by the form read (a form scheduled since is not removed).
    assert timers(finished) == {"find": 1, "delete": 1}
    assert finished[("update", "instances")] == 1
    assert schedules + sum(timers(finished).values()) == 5
    assert database["timers"].count_documents({}) == 0
    instance = domain.instance("p-1")
    assert instance is not None and instance.state == "Done"
