"""MongoTimerStore's batched firing path says, claim by claim, what a batch did - also when
some of a batch's claims no longer hold (the counts come up short and it reads back which)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from flowsched import ManualClock, ScheduleItem, ScheduleKind
from flowsched.outcomes import Completed, Redeliver
from flowsched.store import Settlement

mongomock = pytest.importorskip("mongomock")

from flowsched.mongo import MongoTimerStore  # noqa: E402

ROUTES = frozenset({"h:h"})
LEASE = timedelta(seconds=30)


def _store(n: int) -> tuple[MongoTimerStore, ManualClock]:
    clock = ManualClock()
    client: Any = mongomock.MongoClient(tz_aware=True)
    store = MongoTimerStore(client.db[f"t_{uuid.uuid4().hex[:8]}"], clock=clock)
    for k in range(n):
        due = clock.now() - timedelta(seconds=1)
        store.put(ScheduleItem(f"i{k}", ScheduleKind.TIMER, due, handler="h"))
    return store, clock


def test_a_batch_claim_gives_each_claim_its_own_token_and_one_node_wins() -> None:
    store, _ = _store(5)
    first = store.claim_due(ROUTES, "a", LEASE, 3)
    second = store.claim_due(ROUTES, "b", LEASE, 10)
    assert len({c.token for c in first}) == 3
    assert not {c.item.id for c in first} & {c.item.id for c in second}
    assert len(first) + len(second) == 5


def test_confirm_and_renew_return_only_the_claims_that_still_hold() -> None:
    store, _ = _store(4)
    claims = store.claim_due(ROUTES, "a", LEASE, 10)
    store.remove("i1")
    store.put(ScheduleItem("i2", ScheduleKind.TIMER, claims[2].item.due, handler="h"))
    held = store.confirm_start(claims)
    assert [c.item.id for c in held] == ["i0", "i3"]
    renewed = store.renew(claims, LEASE * 2)
    assert [c.item.id for c in renewed] == ["i0", "i3"]
    assert all(r.lease_until > c.lease_until for r, c in zip(renewed, held, strict=True))


def test_a_settle_with_stale_claims_says_which_applied() -> None:
    store, clock = _store(4)
    claims = {c.item.id: c for c in store.claim_due(ROUTES, "a", LEASE, 10)}
    store.confirm_start(list(claims.values()))
    store.remove("i1")  # a stale completion
    store.put(ScheduleItem("i3", ScheduleKind.TIMER, clock.now(), handler="h"))  # stale retry
    later = (clock.now() + timedelta(minutes=1)).replace(microsecond=0)
    results = store.settle(
        [
            Settlement(claims["i0"], Completed()),
            Settlement(claims["i1"], Completed()),
            Settlement(claims["i2"], Redeliver(later, 1, "E: boom")),
            Settlement(claims["i3"], Redeliver(later, 1, "E: boom")),
        ]
    )
    assert [r.applied for r in results] == [True, False, True, False]
    assert not store.exists("i0") and store.exists("i3")
    retried = store.get("i2")
    assert retried is not None and retried.due == later
    assert [a.outcome for a in store.history("i2")] == ["failed"]
    assert [a.outcome for a in store.history("i0")] == ["succeeded"]
    # The same settle again is stale for every claim: nothing applies twice.
    again = store.settle([Settlement(claims["i0"], Completed())])
    assert [r.applied for r in again] == [False]


def test_a_cancelled_running_delivery_stays_in_the_history_as_started() -> None:
    store, _ = _store(1)
    claims = store.claim_due(ROUTES, "a", LEASE, 10)
    assert store.confirm_start(claims) == claims
    assert store.remove("i0")
    [attempt] = store.history("i0")
    assert attempt.node == "a" and attempt.ended is None
