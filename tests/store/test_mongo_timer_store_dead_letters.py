"""MongoTimerStore's dead letters: a settle that dead-letters an item writes the letter before it
removes the item (two collections, no transaction), so a failure in between never loses the
timer; a fence that no longer holds takes the letter back and leaves the new form alone."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from flowsched import ManualClock, OutcomeUnknown, ScheduleItem, ScheduleKind
from flowsched.outcomes import DeadLettered
from flowsched.records import DeadLetter
from flowsched.store.records import Claim, Settlement

mongomock = pytest.importorskip("mongomock")
errors = pytest.importorskip("pymongo.errors")

from flowsched.mongo import MongoTimerStore  # noqa: E402

LEASE = timedelta(seconds=30)
ROUTES = frozenset({"k:TIMER"})


class Faulty:
    """A mongomock collection whose next call of a method in ``fail`` raises (nothing applied)
    and of one in ``lose`` applies, then raises (its reply lost)."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.fail: set[str] = set()
        self.lose: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._collection, name)
        if name in self.fail:
            self.fail.discard(name)
            return _raising
        if name in self.lose:
            self.lose.discard(name)

            def applied_then_lost(*args: Any, **kwargs: Any) -> Any:
                method(*args, **kwargs)
                _raising()

            return applied_then_lost
        return method


def _raising(*args: Any, **kwargs: Any) -> Any:
    raise errors.AutoReconnect("connection reset")


def _store() -> tuple[MongoTimerStore, Faulty, Faulty, ManualClock]:
    clock = ManualClock()
    items = Faulty(mongomock.MongoClient(tz_aware=True).db[f"t_{uuid.uuid4().hex[:8]}"])
    store = MongoTimerStore(items, clock=clock)  # type: ignore[arg-type]
    roles = store.steps.roles
    dead = roles.dead = Faulty(roles.dead)
    return store, items, dead, clock


def _claimed(store: MongoTimerStore, clock: ManualClock) -> Claim:
    store.put(ScheduleItem("x", ScheduleKind.TIMER, clock.now()))
    [claim] = store.claim_due(ROUTES, "node-a", LEASE, 10)
    assert store.confirm_start([claim]) == [claim]
    return claim


def _dead(claim: Claim, clock: ManualClock) -> Settlement:
    return Settlement(claim, DeadLettered(DeadLetter(claim.item, 1, "Boom: no", clock.now())))


def test_a_dead_letter_write_that_fails_keeps_the_item() -> None:
    store, _, dead, clock = _store()
    claim = _claimed(store, clock)
    dead.fail.add("replace_one")
    with pytest.raises(OutcomeUnknown):
        store.settle([_dead(claim, clock)])
    kept = store.exists("x") or [d.item.id for d in store.dead_letters()] == ["x"]
    assert kept, "the timer was lost: neither its item nor its dead letter is stored"
    assert store.exists("x"), "the item was removed although its dead letter was not written"
    clock.jump(LEASE + timedelta(seconds=1))
    [again] = store.claim_due(ROUTES, "node-b", LEASE, 10)
    assert again.item.id == "x" and again.generation == claim.generation, again
    [result] = store.settle([_dead(again, clock)])
    assert result.applied and not store.exists("x")
    assert [d.item.id for d in store.dead_letters()] == ["x"]


def test_a_removal_whose_reply_was_lost_keeps_its_dead_letter_on_the_retry() -> None:
    store, items, _, clock = _store()
    claim = _claimed(store, clock)
    items.lose.add("delete_one")
    with pytest.raises(OutcomeUnknown):
        store.settle([_dead(claim, clock)])
    [result] = store.settle([_dead(claim, clock)])  # the node settles again: same outcome
    assert result.applied, "the retry said the removal its first try made was not applied"
    assert not store.exists("x")
    assert [d.item.id for d in store.dead_letters()] == ["x"], "the dead letter was taken back"


def test_a_fenced_out_dead_letter_is_taken_back_and_the_new_form_left_alone() -> None:
    store, _, _, clock = _store()
    claim = _claimed(store, clock)
    new = store.put(ScheduleItem("x", ScheduleKind.TIMER, clock.now(), payload={"v": 2}))
    [result] = store.settle([_dead(claim, clock)])
    assert not result.applied, "a settle of a replaced form applied"
    assert store.dead_letters() == [], "the replaced form's dead letter was left behind"
    stored = store.get("x")
    assert stored is not None and stored.generation == new.generation
    assert stored.payload == {"v": 2}
    [fresh] = store.claim_due(ROUTES, "node-b", LEASE, 10)
    assert fresh.item.generation == new.generation and fresh.lapsed == 0, fresh


def test_a_dead_letter_of_a_claim_taken_over_is_taken_back() -> None:
    store, _, _, clock = _store()
    claim = _claimed(store, clock)
    clock.jump(LEASE + timedelta(seconds=1))  # node-a's lease ended: node-b holds the item
    [taken] = store.claim_due(ROUTES, "node-b", LEASE, 10)
    [result] = store.settle([_dead(claim, clock)])
    assert not result.applied and store.dead_letters() == []
    assert store.exists("x")
    assert store.renew([taken], LEASE) != [], "the live claim was disturbed"


def test_a_stale_dead_letter_leaves_the_letter_of_the_claim_that_took_over() -> None:
    # node-a's lease ends; node-b claims the item, fails its last attempt and dead-letters
    # it; node-a's own (stale) last failure then arrives: the timer must stay a dead letter.
    store, _, _, clock = _store()
    stale = _claimed(store, clock)
    clock.jump(LEASE + timedelta(seconds=1))
    [taken] = store.claim_due(ROUTES, "node-b", LEASE, 10)
    [done] = store.settle([_dead(taken, clock)])
    assert done.applied and not store.exists("x")
    [result] = store.settle([_dead(stale, clock)])
    assert not result.applied, "a stale claim's dead letter applied"
    assert [d.item.id for d in store.dead_letters()] == ["x"], (
        "the timer was lost: a stale settle removed the dead letter another claim wrote"
    )
