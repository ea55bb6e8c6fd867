"""Claims fence every write: a stale delivery never removes or reschedules what replaced it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowsched.delivery import Completed, Redeliver, RedeliveryPolicy
from flowsched.mongo.settlement import Release, Settlement
from flowsched.port import ScheduleItem, ScheduleKind

LEASE = timedelta(seconds=30)


def timer(item_id: str, due, **fields: object) -> ScheduleItem:
    return ScheduleItem(item_id, ScheduleKind.TIMER, due, **fields)  # type: ignore[arg-type]


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
    a.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    b.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    a.schedule(timer("t", clock.now()))
    stale = a._claimer.take(10).deliver[0]  # a claims, then goes silent
    clock.advance(LEASE + timedelta(seconds=1))
    b_harvest = b._claimer.take(10)  # b takes over (a's delivery counts as lost)
    assert b_harvest.won == 1
    token_b = collection.find_one({"_id": "t"})["claim"]["token"]

    a._claims.settle([Settlement.of(stale, Completed())], clock.now())
    redeliver = Redeliver(clock.now(), 1, "stale")
    a._claims.settle([Settlement.of(stale, redeliver)], clock.now())

    doc = collection.find_one({"_id": "t"})
    assert doc is not None and doc["claim"]["token"] == token_b
    assert doc["last_error"] is None


def test_a_lost_delivery_counts_as_a_failure_and_is_redelivered_with_backoff(make, clock):
    a = make(lease=LEASE)
    b = make(lease=LEASE, redelivery=RedeliveryPolicy(initial=timedelta(seconds=2)))
    attempts: list[int] = []
    a.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    b.subscribe(ScheduleKind.TIMER, lambda item, attempt: attempts.append(attempt))
    a.schedule(timer("t", clock.now()))
    # Claimed and marked started by a (as a suspect claim is), which dies mid-delivery.
    (claim,) = a._claimer.take(10).deliver
    a._claims.settle([], clock.now(), starts=[claim])

    clock.advance(LEASE - timedelta(seconds=1))
    assert b.run_due() == 0 and attempts == []  # the lease still holds
    clock.advance(timedelta(seconds=1))
    assert b.run_due() == 0  # lease over: the lost delivery is recorded as failure 1
    assert b.get("t").due == clock.now() + timedelta(seconds=2)
    clock.advance(timedelta(seconds=2))
    assert b.run_due() == 1
    assert attempts == [1]
    assert not b.exists("t")


def test_lost_deliveries_reach_the_dead_letters_at_max_attempts(make, clock):
    a = make(lease=LEASE)
    b = make(lease=LEASE, redelivery=RedeliveryPolicy(max_attempts=1))
    calls: list[int] = []
    a.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    b.subscribe(ScheduleKind.TIMER, lambda item, attempt: calls.append(attempt))
    a.schedule(timer("poison", clock.now()))
    (claim,) = a._claimer.take(10).deliver
    a._claims.settle([], clock.now(), starts=[claim])  # marked started, then a died
    clock.advance(LEASE)
    b.run_due()
    assert calls == []
    (dead,) = b.dead_letters()
    assert (dead.item.id, dead.attempts) == ("poison", 1)
    assert "delivery lost" in dead.error
    assert not b.exists("poison")


@pytest.mark.parametrize("max_attempts", [1, None])
def test_a_claim_whose_handler_never_started_comes_back_uncounted_at_lease_end(
    make, clock, max_attempts
):
    a = make(lease=LEASE)
    b = make(lease=LEASE, redelivery=RedeliveryPolicy(max_attempts=max_attempts))
    attempts: list[int] = []
    a.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    b.subscribe(ScheduleKind.TIMER, lambda item, attempt: attempts.append(attempt))
    a.schedule(timer("t", clock.now()))
    assert a._claimer.take(10).won == 1  # claimed by a, which dies before starting it

    clock.advance(LEASE - timedelta(seconds=1))
    assert b.run_due() == 0  # the lease still holds
    clock.advance(timedelta(seconds=1))
    assert b.run_due() == 1  # at lease end: no backoff, no attempt counted, not dead
    assert attempts == [0]
    assert b.dead_letters() == [] and not b.exists("t")


def test_a_fresh_claim_is_not_marked_and_one_finding_a_lost_claim_is(make, clock, collection):
    a, b = make(lease=LEASE), make(lease=LEASE)
    for node in (a, b):
        node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    a.schedule(timer("t", clock.now()))
    (fresh,) = a._claimer.take(10).deliver
    assert not fresh.suspect
    assert collection.find_one({"_id": "t"})["deliveries"] == 0  # nothing counted

    clock.advance(LEASE)  # a died, maybe mid-handler: its claim is still on the document
    (suspect,) = b._claimer.take(10, mark=True).deliver
    assert suspect.suspect and suspect.attempt == 0
    doc = collection.find_one({"_id": "t"})
    assert (doc["attempts"], doc["deliveries"]) == (0, 1)  # marked before its handler runs


def test_a_handler_that_kills_its_node_is_dead_lettered_after_two_runs(make, clock):
    policy = RedeliveryPolicy(max_attempts=1)
    nodes = [make(lease=LEASE, redelivery=policy) for _ in range(3)]
    runs: list[int] = []
    for node in nodes:
        node.subscribe(ScheduleKind.TIMER, lambda item, attempt: runs.append(attempt))
    nodes[0].schedule(timer("t", clock.now()))
    for node in nodes[:2]:  # each claims and starts the handler, which kills the node
        (claim,) = node._claimer.take(10, mark=True).deliver
        node._core.deliver(claim.item, claim.attempt)  # the handler runs; no outcome written
        clock.advance(LEASE)
    assert runs == [0, 0]
    assert nodes[2].run_due() == 0  # the second, marked run was lost: counted, no third run
    (dead,) = nodes[2].dead_letters()
    assert (dead.item.id, dead.attempts) == ("t", 1) and "delivery lost" in dead.error
    assert runs == [0, 0]


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
    assert doc["claim"] is None and (doc["attempts"], doc["deliveries"]) == (1, 1)
    clock.advance(timedelta(seconds=1))
    (claim,) = scheduler._claimer.take(10).deliver
    assert not claim.suspect  # a failure is no lost claim: no start mark for the retry


def test_a_suspect_claim_given_back_unrun_stays_suspect(make, clock, collection):
    a, b, c = (make(lease=LEASE) for _ in range(3))
    for node in (a, b, c):
        node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    a.schedule(timer("t", clock.now()))
    a._claimer.take(10)
    clock.advance(LEASE)  # a died
    (suspect,) = b._claimer.take(10, mark=True).deliver
    release = Release(suspect.item.due, suspect.attempt)
    b._claims.settle([Settlement.of(suspect, release)], clock.now())  # b closes: unrun
    doc = collection.find_one({"_id": "t"})
    assert doc["deliveries"] == 0 and doc["claim"] is not None  # uncounted, still suspect
    assert doc["claim"]["lease_until"] == doc["ready_at"]  # not held: claimable at once
    (again,) = c._claimer.take(10).deliver
    assert again.suspect


def test_a_start_mark_makes_a_lost_claim_count(make, clock):
    a = make(lease=LEASE)
    b = make(lease=LEASE, redelivery=RedeliveryPolicy(max_attempts=1))
    a.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    b.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    a.schedule(timer("t", clock.now()))
    (claim,) = a._claimer.take(10).deliver
    a._claims.settle([], clock.now(), starts=[claim])  # what the sweeper writes first
    a._claims.settle([], clock.now(), starts=[claim])  # a repeated write counts once

    clock.advance(LEASE)
    assert b.run_due() == 0
    (dead,) = b.dead_letters()
    assert (dead.item.id, dead.attempts) == ("t", 1)


def test_two_nodes_never_claim_the_same_document(make, clock):
    a, b = make(), make()
    for node in (a, b):
        node.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
    for n in range(10):
        a.schedule(timer(f"t-{n}", clock.now()))
    first = a._claimer.take(6)
    second = b._claimer.take(10)
    ids_a = {c.item.id for c in first.deliver}
    ids_b = {c.item.id for c in second.deliver}
    assert (len(ids_a), len(ids_b)) == (6, 4)
    assert not ids_a & ids_b
    assert b._claimer.take(10).won == 0


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
