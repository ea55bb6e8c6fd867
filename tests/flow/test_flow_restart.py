"""With MongoScheduler and MongoFlowStore a restart loses nothing: timers reach reloaded flows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flowkit import FLOW, T0, Harness, S, SchemeRulesValidated, make_harness

from flowsched import ManualClock

CONF = """
Any.CheckingFraud.CheckFraud.timeout-duration = 30s
Any.CheckingFraud.CheckFraud.max-retries = 1
Any.CheckingFraud.CheckFraud.initial-retry-interval = 10s
Any.CheckingFraud.CheckFraud.jitter-enabled = false
"""
VALIDATED = {"ValidateAgainstSchemeRules": SchemeRulesValidated()}


def _mongomock_db(request: pytest.FixtureRequest) -> Any:
    mongomock = pytest.importorskip("mongomock")
    return mongomock.MongoClient()["restart"]


def _wire_db(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("mongo_db")


DATABASES: dict[str, Callable[[pytest.FixtureRequest], Any]] = {
    "mongomock": _mongomock_db,
    "mongo-wire": _wire_db,
}


@pytest.fixture(params=list(DATABASES))
def db(request: pytest.FixtureRequest) -> Any:
    return DATABASES[request.param](request)


def _process(db: Any, clock: ManualClock, node: str) -> Harness:
    """A fresh process: a new scheduler, store and domain on the same collections."""
    from flowsched import MongoScheduler
    from flowsched.mongo.flow_store import MongoFlowStore

    scheduler = MongoScheduler(db["timers"], node_id=node, clock=clock)
    store = MongoFlowStore(db["flow_instances"])
    return make_harness(clock, CONF, respond=VALIDATED, scheduler=scheduler, store=store)


def test_a_timeout_firing_after_a_restart_moves_the_reloaded_flow(
    db: Any, clock: ManualClock
) -> None:
    before = _process(db, clock, "before")
    before.domain.start(FLOW, "tx-1")
    before.advance(10 * S)
    assert before.state() == "CheckingFraud"
    assert before.attempts("CheckFraud") == [0 * S, 10 * S]
    before.scheduler.close()
    del before  # the process is gone: nothing of it is used again

    after = _process(db, clock, "after")
    after.advance(20 * S)

    assert after.state() == "FraudTimedOut"
    fired = [e for e in after.timeline if e.what == "fired"]
    assert len(fired) == 1 and fired[0].at == T0 + 30 * S and "CheckFraud" in fired[0].detail
    assert after.calls == []  # the restart invoked nothing again
    assert after.domain.timers("tx-1") == []
    after.scheduler.close()
