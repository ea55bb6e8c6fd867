"""Claims fence every write: a stale delivery never removes or reschedules what replaced it.

Lost runs (a node that dies or is cut off while its handler runs): one is free (nodes die for
many reasons), two in a row count the last as a failed delivery (flowsched/node/lost.py). The
dead nodes are played on the scheduler's own store (``scheduler.store``): a claim taken, its
start recorded, its lease left to end."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowsched.delivery import DeadLettered, Redeliver, RedeliveryPolicy
from flowsched.port import ScheduleItem, ScheduleKind
from flowsched.records import DeadLetter
from flowsched.routes import kind_route
from flowsched.store import Claim, Settlement

LEASE = timedelta(seconds=30)
ROUTES = frozenset({kind_route(ScheduleKind.TIMER)})


def timer(item_id: str, due, **fields: object) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, due, **fields)  # type: ignore[arg-type]


def claimed(node: Any, limit: int = 10) -> list[Claim]:
    """``node`` claims what is due on its store, as its core would (not yet started)."""
    return node.store.claim_due(ROUTES, node.node_id, LEASE, limit)


def started_and_lost(node: Any, clock: Any) -> Claim:
    """``node`` claims the one due item and starts it, then dies: its lease ends unsettled."""
    [claim] = claimed(node)
    assert node.store.confirm_start([claim]) == [claim]
    clock.advance(LEASE)
    return claim


def test_a_replacement_made_during_delivery_survives_the_old_completion(make, clock):
    scheduler = make()
    seen: list[tuple[int, int]] = []

    def replace_self(item: ScheduleItem, attempt: int) -> None:
        seen.append((item.generation, attempt))
        if len(seen) == 1:
            scheduler.schedule(timer(item.id, clock.now() + timedelta(seconds=5)))

    scheduler.subscribe(ScheduleKind.TIMER, replace_self)
    first = scheduler.schedule(timer("t", clock.now()))
    scheduler.run_due()
    replacement = scheduler.get("t")
    assert replacement is not None and replacement.generation != first.generation
    clock.advance(timedelta(seconds=5))
    scheduler.run_due()
    assert seen == [(first.generation, 0), (replacement.generation, 0)]
    assert not scheduler.exists("t")


def test_a_cancel_during_delivery_is_not_undone_by_a_failure(make, clock):
    scheduler = make()

    def cancel_then_fail(item: ScheduleItem, attempt: int) -> None:
        scheduler.cancel(item.id)
        raise RuntimeError("late failure")

    scheduler.subscribe(ScheduleKind.TIMER, cancel_then_fail)
    scheduler.schedule(timer("t", clock.now()))
    assert scheduler.run_due() == 1
    assert not scheduler.exists("t")  # the failure's redelivery matched nothing


def test_a_claim_taken_over_after_its_lease_cannot_write(make, clock, collection):
    a, b = make(lease=LEASE), make(lease=LEASE)
    a.schedule(timer("t", clock.now()))
    [stale] = claimed(a)  # a claims, starts, then goes silent
    assert a.store.confirm_start([stale]) == [stale]
    clock.advance(LEASE + timedelta(seconds=1))
    [taken] = claimed(b)  # b takes over
    assert taken.token != stale.token
    token_b = collection.find_one({"_id": "t"})["claim"]["token"]

    # (A stale Completed of a one-shot item settles its generation: a late completion,
    # tests/mongo/test_mongo_late_completion.py. Every other outcome of a lapsed claim is stale.)
    results = a.store.settle(
        [
            Settlement(stale, Redeliver(clock.now(), 1, "RuntimeError: stale")),
            Settlement(stale, DeadLettered(DeadLetter(stale.item, 1, "E: stale", clock.now()))),
        ]
    )

    assert [r.applied for r in results] == [False, False]
    assert a.store.dead_letters() == [], "the lapsed claim's DeadLettered wrote a letter"
    doc = collection.find_one({"_id": "t"})
    assert doc is not None and doc["claim"]["token"] == token_b
    assert doc.get("last_error") is None and doc["attempts"] == 0
    assert b.store.renew([taken], LEASE) != [], "the live claim was disturbed"


def test_a_lost_delivery_counts_as_a_failure_and_is_redelivered_with_backoff(make, clock):
    a, b = make(lease=LEASE), make(lease=LEASE)
    c = make(lease=LEASE, redelivery=RedeliveryPolicy(initial=timedelta(seconds=2)))
    attempts: list[int] = []
    c.subscribe(ScheduleKind.TIMER, lambda item, attempt: attempts.append(attempt))
    c.schedule(timer("t", clock.now()))
    started_and_lost(a, clock)  # a starts it and dies: free, nodes die for many reasons
    [claim] = claimed(b)  # b starts it and dies too: the last lost run counts
    assert b.store.confirm_start([claim]) == [claim]
    clock.advance(LEASE - timedelta(seconds=1))
    assert c.run_due() == 0 and attempts == []  # b's lease still holds
    clock.advance(timedelta(seconds=1))

    c.run_due()
    assert attempts == []  # not run a third time: failure 1, redelivered with backoff
    stored = c.get("t")
    assert stored is not None and stored.due == clock.now() + timedelta(seconds=2)
    clock.advance(timedelta(seconds=2))
    assert c.run_due() == 1
    assert attempts == [1]
    assert not c.exists("t")


def test_lost_deliveries_reach_the_dead_letters_at_max_attempts(make, clock):
    a, b = make(lease=LEASE), make(lease=LEASE)
    c = make(lease=LEASE, redelivery=RedeliveryPolicy(max_attempts=1))
    calls: list[int] = []
    c.subscribe(ScheduleKind.TIMER, lambda item, attempt: calls.append(attempt))
    c.schedule(timer("poison", clock.now()))
    for node in (a, b):
        started_and_lost(node, clock)  # marked started, then the node died
    c.run_due()
    assert calls == []
    (dead,) = c.dead_letters()
    assert (dead.item.id, dead.attempts) == ("poison", 1)
    assert "DeliveryLost" in dead.error
    assert not c.exists("poison")


@pytest.mark.parametrize("max_attempts", [1, None])
def test_a_claim_whose_handler_never_started_comes_back_uncounted_at_lease_end(
    make, clock, max_attempts
):
    a = make(lease=LEASE)
    b = make(lease=LEASE, redelivery=RedeliveryPolicy(max_attempts=max_attempts))
    attempts: list[int] = []
    b.subscribe(ScheduleKind.TIMER, lambda item, attempt: attempts.append(attempt))
    a.schedule(timer("t", clock.now()))
    assert len(claimed(a)) == 1  # claimed by a, which dies before starting it

    clock.advance(LEASE - timedelta(seconds=1))
    assert b.run_due() == 0  # the lease still holds
    clock.advance(timedelta(seconds=1))
    assert b.run_due() == 1  # at lease end: no backoff, no attempt counted, not dead
    assert attempts == [0]
    assert b.dead_letters() == [] and not b.exists("t")


def test_a_fresh_claim_counts_no_lost_run_and_one_finding_a_lost_run_does(make, clock):
    a, b, c = make(lease=LEASE), make(lease=LEASE), make(lease=LEASE)
    a.schedule(timer("t", clock.now()))
    [fresh] = claimed(a)
    assert (fresh.attempt, fresh.lapsed) == (0, 0)  # nothing counted
    clock.advance(LEASE)  # a died before starting it: a lapse before any start is free
    [unstarted] = claimed(b)
    assert (unstarted.attempt, unstarted.lapsed) == (0, 0)
    assert b.store.confirm_start([unstarted]) == [unstarted]
    clock.advance(LEASE)  # b died mid-handler: its claim is still on the document
    [suspect] = claimed(c)
    assert (suspect.attempt, suspect.lapsed) == (0, 1)  # one lost run, no failure


def test_a_handler_that_kills_its_node_is_dead_lettered_after_two_runs(make, clock):
    policy = RedeliveryPolicy(max_attempts=1)
    nodes = [make(lease=LEASE, redelivery=policy) for _ in range(3)]
    runs: list[int] = []
    for node in nodes:
        node.subscribe(ScheduleKind.TIMER, lambda item, attempt: runs.append(attempt))
    nodes[0].schedule(timer("t", clock.now()))
    for node in nodes[:2]:  # each claims and starts the handler, which kills the node
        claim = started_and_lost(node, clock)
        runs.append(claim.attempt)  # the handler ran; no outcome written
    assert runs == [0, 0]
    nodes[2].run_due()  # the second run was lost too: counted, no third run
    (dead,) = nodes[2].dead_letters()
    assert (dead.item.id, dead.attempts) == ("t", 1) and "DeliveryLost" in dead.error
    assert runs == [0, 0]
    assert [a.outcome for a in nodes[2].history("t")][:2] == ["lapsed", "lapsed"]


def test_every_settlement_that_keeps_the_document_clears_its_claim(make, clock, collection):
    scheduler = make(lease=LEASE, redelivery=RedeliveryPolicy(initial=timedelta(seconds=1)))
    attempts: list[int] = []

    def fail_once(item: ScheduleItem, attempt: int) -> None:
        attempts.append(attempt)
        if attempt == 0:
            raise RuntimeError("once")

    scheduler.subscribe(ScheduleKind.TIMER, fail_once)
    scheduler.schedule(timer("t", clock.now()))
    assert scheduler.run_due() == 1
    doc = collection.find_one({"_id": "t"})
    assert doc["claim"] is None and doc["attempts"] == 1
    clock.advance(timedelta(seconds=1))
    [claim] = claimed(scheduler)
    assert (claim.attempt, claim.lapsed) == (1, 0)  # a failure is no lost run


def test_a_claim_that_found_a_lost_run_given_back_unrun_keeps_the_count(make, clock):
    a, b, c = (make(lease=LEASE) for _ in range(3))
    a.schedule(timer("t", clock.now()))
    started_and_lost(a, clock)  # a died mid-handler
    [suspect] = claimed(b)
    assert suspect.lapsed == 1
    assert b.store.release([suspect]) == 1  # b closes: given back unrun
    [again] = claimed(c)  # claimable at once, the lost run still counted, once
    assert (again.attempt, again.lapsed) == (0, 1)


def test_a_repeated_start_counts_one_lost_run(make, clock):
    a, b = make(lease=LEASE), make(lease=LEASE)
    a.schedule(timer("t", clock.now()))
    [claim] = claimed(a)
    assert a.store.confirm_start([claim]) == [claim]
    assert a.store.confirm_start([claim]) == [claim]  # a repeated write counts once
    clock.advance(LEASE)
    [again] = claimed(b)
    assert (again.attempt, again.lapsed) == (0, 1)


def test_two_nodes_never_claim_the_same_document(make, clock):
    a, b = make(), make()
    for n in range(10):
        a.schedule(timer(f"t-{n}", clock.now()))
    first = claimed(a, 6)
    second = claimed(b, 10)
    ids_a = {c.item.id for c in first}
    ids_b = {c.item.id for c in second}
    assert (len(ids_a), len(ids_b)) == (6, 4)
    assert not ids_a & ids_b
    assert claimed(b, 10) == []


def test_requeued_dead_letter_gets_a_fresh_generation_and_zero_attempts(make, clock):
    scheduler = make(redelivery=RedeliveryPolicy(max_attempts=1))
    attempts: list[int] = []

    def fail_once(item: ScheduleItem, attempt: int) -> None:
        attempts.append(attempt)
        if len(attempts) == 1:
            raise RuntimeError("down")

    scheduler.subscribe(ScheduleKind.TIMER, fail_once)
    old = scheduler.schedule(timer("t", clock.now(), payload={"k": "v"}))
    scheduler.run_due()
    assert [d.item.id for d in scheduler.dead_letters()] == ["t"]
    assert scheduler.requeue("t")
    assert scheduler.dead_letters() == []
    requeued = scheduler.get("t")
    assert requeued.generation != old.generation and requeued.payload == {"k": "v"}
    scheduler.run_due()
    assert attempts == [0, 0]
    assert not scheduler.requeue("t")


def test_a_replaced_item_leaves_no_dead_letter_for_its_old_form(make, clock):
    scheduler = make(redelivery=RedeliveryPolicy(max_attempts=1))

    def replace_then_fail(item: ScheduleItem, attempt: int) -> None:
        if item.payload == {"v": 1}:
            scheduler.schedule(timer(item.id, clock.now() + timedelta(hours=1), payload={"v": 2}))
            raise RuntimeError("old form fails for good")

    scheduler.subscribe(ScheduleKind.TIMER, replace_then_fail)
    scheduler.schedule(timer("t", clock.now(), payload={"v": 1}))
    scheduler.run_due()
    assert scheduler.dead_letters() == []
    assert scheduler.get("t").payload == {"v": 2}


def test_a_naive_requeue_due_is_refused_even_with_no_dead_letter(make):
    # As in memory: the argument is checked before the lookup (it returned False).
    from datetime import datetime

    with pytest.raises(ValueError, match="requeue due must be timezone-aware"):
        make().requeue("no-such-letter", datetime(2026, 1, 1))
