"""Flow stores keep instances exactly and never lose an update (optimistic versioning)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from flowsched.flow import (
    ConcurrentUpdateError,
    FlowAlreadyExistsError,
    FlowInstance,
    FlowStore,
    InMemoryFlowStore,
)
from flowsched.flow.instance import ActionRun, PendingDeadline

T0 = datetime(2026, 3, 1, 9, 30, 0, 123456, tzinfo=UTC)


def _memory(request: pytest.FixtureRequest) -> FlowStore:
    return InMemoryFlowStore()


def _mongomock(request: pytest.FixtureRequest) -> FlowStore:
    mongomock = pytest.importorskip("mongomock")
    from flowsched.mongo.flow_store import MongoFlowStore

    return MongoFlowStore(mongomock.MongoClient()["flows"]["instances"])


def _wire(request: pytest.FixtureRequest) -> FlowStore:
    from flowsched.mongo.flow_store import MongoFlowStore

    return MongoFlowStore(request.getfixturevalue("mongo_db")["instances"])


def _postgres(request: pytest.FixtureRequest) -> FlowStore:
    pytest.importorskip("psycopg")
    from flowsched.postgres import PostgresFlowStore

    url = request.getfixturevalue("postgres_url")
    store = PostgresFlowStore(url, table=request.getfixturevalue("fresh_table")(), pool_size=1)
    request.addfinalizer(store.close)
    return store


STORES: dict[str, Callable[[pytest.FixtureRequest], FlowStore]] = {
    "memory": _memory,
    "mongomock": _mongomock,
    "mongo-wire": _wire,
    "postgres": _postgres,
}


@pytest.fixture(params=list(STORES))
def store(request: pytest.FixtureRequest) -> FlowStore:
    return STORES[request.param](request)


def _instance(**changes: Any) -> FlowInstance:
    base = FlowInstance(
        flow_id="tx-1",
        flow="OBCreditTransfer",
        state="CheckingFraud",
        entry=2,
        entered_at=T0,
        offsets={"ValidatingSchemeRules": T0, "accepted": T0},
        data={"amount": "10.00", "tags": ["a"]},
        actions=(ActionRun("CheckFraud", 3, T0, deadline=T0, completed=False),),
        deadlines=(PendingDeadline("pt:tx-1", "ValidatingSchemeRules", "Complete", T0, 1),),
    )
    return replace(base, **changes)


def test_an_inserted_instance_loads_back_equal_at_version_1(store: FlowStore) -> None:
    stored = store.insert(_instance())

    assert stored.version == 1
    assert store.load("tx-1") == stored


def test_microseconds_and_utc_survive_the_round_trip(store: FlowStore) -> None:
    store.insert(_instance())

    loaded = store.load("tx-1")

    assert loaded is not None
    assert loaded.entered_at == T0 and loaded.entered_at.tzinfo == UTC
    assert loaded.offsets["accepted"] == T0


def test_an_unknown_id_loads_as_none(store: FlowStore) -> None:
    assert store.load("nope") is None


def test_inserting_an_existing_id_is_refused(store: FlowStore) -> None:
    store.insert(_instance())

    with pytest.raises(FlowAlreadyExistsError, match="tx-1"):
        store.insert(_instance(state="Complete"))


def test_an_update_moves_to_the_next_version(store: FlowStore) -> None:
    stored = store.insert(_instance())

    updated = store.update(replace(stored, state="Complete", finished=True))

    assert updated.version == 2
    assert store.load("tx-1") == updated


def test_of_two_updates_from_one_version_the_second_is_refused(store: FlowStore) -> None:
    stored = store.insert(_instance())
    store.update(replace(stored, state="Complete"))

    with pytest.raises(ConcurrentUpdateError, match="tx-1"):
        store.update(replace(stored, state="FraudTimedOut"))

    loaded = store.load("tx-1")
    assert loaded is not None and loaded.state == "Complete"
