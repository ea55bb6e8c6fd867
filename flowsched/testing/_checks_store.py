"""Internal: the guarantees of the store interface that :func:`check_timer_store` tries.

Each check gets a fresh empty store and asserts with a message saying what was seen.
"""

from __future__ import annotations

from datetime import timedelta

from flowsched.errors import SchedulerUnavailable
from flowsched.outcomes import Completed, DeadLettered, NextSlot, Outcome, Redeliver
from flowsched.records import DeadLetter, ScheduleItem, ScheduleKind
from flowsched.recurrence import Recurrence
from flowsched.store.records import Settlement, TimerSelection
from flowsched.testing._checks_lapses import LOST_RUNS
from flowsched.testing._checks_leases import LATE_SETTLE, LOST_RENEWAL_REPLY
from flowsched.testing._store_trial import OTHER_HANDLER, StoreCheck, StoreTrial

__all__ = ["STORE_GUARANTEES"]

A, B = "node-a", "node-b"
_S = timedelta(seconds=1)
OTHER = OTHER_HANDLER


def _put_generations(t: StoreTrial) -> None:
    first = t.store.put(t.item("x"))
    assert first.generation > 0, f"put gave generation {first.generation}"
    assert t.store.exists("x") and t.store.get("x") == first, "get after put"
    second = t.store.put(t.item("x", payload={"v": 2}))
    assert second.generation not in (0, first.generation), (
        f"replace gave generation {second.generation} after {first.generation}"
    )
    got = t.store.get("x")
    assert got is not None and got.payload == {"v": 2}, f"get after replace: {got!r}"
    assert t.store.get("nope") is None and not t.store.exists("nope"), "unknown id exists"


def _replace_fences_claim(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    [old] = t.store.claim_due(t.routes, A, t.lease, 10)
    new = t.store.put(t.item("x", payload={"v": 2}))
    assert t.store.confirm_start([old]) == [], "a claim of the replaced form was confirmed"
    [result] = t.store.settle([Settlement(old, Completed())])
    assert not result.applied, "a stale Completed applied"
    assert t.store.get("x") == new, "a stale settle touched the new form"
    claims = t.store.claim_due(t.routes, B, t.lease, 10)
    assert [c.item.generation for c in claims] == [new.generation], (
        f"the replacement (unclaimed) was not claimable: {claims}"
    )


def _remove_idempotent(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    assert t.store.remove("x") is True, "remove of a stored item answered False"
    assert t.store.remove("x") is False, "a second remove answered True"
    assert not t.store.exists("x"), "exists after remove"


def _remove_generation_fence(t: StoreTrial) -> None:
    old = t.store.put(t.item("x"))
    new = t.store.put(t.item("x"))
    assert t.store.remove("x", generation=old.generation) is False, "removed a newer form"
    assert t.store.get("x") == new, "the newer form is gone"
    assert t.store.remove("x", generation=new.generation) is True, "generation remove"


def _deadline_fence(t: StoreTrial) -> None:
    t.store.put(t.item("x", flow_id="f"))
    past = t.store.now() - _S
    assert t.store.remove("x", deadline=past) is False, "a late remove answered True"
    assert t.store.exists("x"), "a remove past its deadline removed the item"
    assert t.store.remove_flow("f", deadline=past) == [], "a late remove_flow removed"
    assert t.store.exists("x"), "a remove_flow past its deadline removed the item"
    try:
        t.store.put(t.item("y"), deadline=past)
    except SchedulerUnavailable:
        pass
    else:
        raise AssertionError("a put past its deadline did not raise SchedulerUnavailable")
    assert not t.store.exists("y"), "a put past its deadline stored the item"
    future = t.store.now() + timedelta(minutes=5)
    assert t.store.remove("x", deadline=future) is True, "a remove in time did not apply"


def _remove_flow(t: StoreTrial) -> None:
    for item_id, flow in (("a1", "fa"), ("a2", "fa"), ("b1", "fb"), ("n", None)):
        t.store.put(t.item(item_id, flow_id=flow))
    assert t.store.remove_flow("fa") == ["a1", "a2"], "remove_flow's ids"
    assert [t.store.exists(i) for i in ("a1", "a2", "b1", "n")] == [False, False, True, True]
    assert t.store.remove_flow("fa") == [], "a second remove_flow removed something"


def _claim_selects(t: StoreTrial) -> None:
    t.store.put(t.item("late", due_in=-3 * _S))
    t.store.put(t.item("early", due_in=-9 * _S))
    t.store.put(t.item("future", due_in=timedelta(hours=1)))
    t.store.put(t.item("other", due_in=-9 * _S, handler=OTHER_HANDLER))
    t.store.put(t.item("paused", due_in=-9 * _S))
    assert t.store.pause("paused"), "pause of a stored item answered False"
    claims = t.store.claim_due(t.routes, A, t.lease, 1)
    assert [c.item.id for c in claims] == ["early"], f"limit 1, soonest due: {claims}"
    claims = t.store.claim_due(t.routes, A, t.lease, 10)
    assert [c.item.id for c in claims] == ["late"], (
        f"claimed (not due, other route, paused, already claimed must be left): {claims}"
    )
    claim = claims[0]
    assert claim.owner == A and claim.attempt == 0, f"claim fields: {claim}"
    assert claim.lease_until > t.store.now(), f"lease in the past: {claim.lease_until}"


def _claim_exclusive(t: StoreTrial) -> None:
    for n in range(6):
        t.store.put(t.item(f"x{n}"))
    first = t.store.claim_due(t.routes, A, t.lease, 3)
    second = t.store.claim_due(t.routes, B, t.lease, 10)
    ids_a = {c.item.id for c in first}
    ids_b = {c.item.id for c in second}
    assert len(ids_a) == 3 and len(ids_b) == 3 and not ids_a & ids_b, (
        f"two owners claimed one item: {sorted(ids_a)} and {sorted(ids_b)}"
    )
    assert t.store.claim_due(t.routes, B, t.lease, 10) == [], "a held item claimed again"


def _expired_lease(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    [old] = t.store.claim_due(t.routes, A, t.short, 10)
    assert t.store.confirm_start([old]) == [old], "a live claim was not confirmed"
    [settled] = t.store.settle([Settlement(old, Redeliver(t.store.now() - _S, 1, "E: one"))])
    assert settled.applied, "a held claim's Redeliver did not apply"
    [held] = t.store.claim_due(t.routes, A, t.short, 10)
    assert held.attempt == 1, f"attempt after one failure: {held.attempt}"
    assert t.store.confirm_start([held]) == [held], "a live claim was not confirmed"
    t.expire()
    assert t.store.confirm_start([held]) == [], "a claim whose lease ended was confirmed"
    # Re-claimed by the same owner: the new claim is another claim (a new token).
    [again] = t.store.claim_due(t.routes, A, t.short, 10)
    assert again.owner == A and again.attempt == 1, f"re-claim after expiry: {again}"
    assert again.token != held.token, f"a re-claim kept the lapsed claim's token: {again}"
    assert t.store.renew([held], t.short) == [], "the lapsed claim was renewed"
    dead = DeadLetter(held.item, 2, "E: two", t.store.now())
    failures: list[Outcome] = [Redeliver(t.store.now() - _S, 2, "E: two"), DeadLettered(dead)]
    for failure in failures:
        [stale] = t.store.settle([Settlement(held, failure)])
        assert not stale.applied, f"the lapsed claim's {type(failure).__name__} applied"
    assert t.store.dead_letters() == [], "the lapsed claim's DeadLettered wrote a letter"
    assert t.store.release([held]) == 0, "the lapsed claim was released"
    assert t.store.confirm_start([again]) == [again], "a stale settle touched the re-claim"
    outcomes = [a.outcome for a in t.store.history("x")]
    assert outcomes == ["failed", "lapsed", None], f"history after a lapse: {outcomes}"
    # Its run succeeded, late: a one-shot Completed settles its generation, whoever holds it.
    [late] = t.store.settle([Settlement(held, Completed())])
    expected = t.store.now() - held.lease_until
    assert late.applied and not t.store.exists("x"), "a late completion did not apply"
    assert late.late is not None and abs(late.late - expected) <= _S, (
        f"a late completion is late by {late.late}, not by about {expected} (its own lease)"
    )
    [after] = t.store.settle([Settlement(again, Completed())])
    assert not after.applied, "the re-claim settled an item a late completion had settled"
    assert t.store.dead_letters() == [], "a late completion left a dead letter"


def _confirm_start(t: StoreTrial) -> None:
    for item_id in ("keep", "cancel", "replace", "pause"):
        t.store.put(t.item(item_id))
    claims = t.store.claim_due(t.routes, A, t.lease, 10)
    assert len(claims) == 4, f"claims: {claims}"
    t.store.remove("cancel")
    t.store.put(t.item("replace"))
    t.store.pause("pause")
    held = t.store.confirm_start(claims)
    assert [c.item.id for c in held] == ["keep"], (
        f"confirm_start kept {[c.item.id for c in held]}; only 'keep' still holds"
    )
    history = t.store.history("keep")
    assert len(history) == 1 and history[0].node == A and history[0].ended is None, (
        f"the start was not recorded: {history}"
    )
    assert t.store.history("cancel") == [], "a start that never happened is in the history"


def _claim_started(t: StoreTrial) -> None:
    claim_started = getattr(t.store, "claim_started", None)
    if not callable(claim_started):
        return  # optional: a store without it is run with claim_due and confirm_start
    t.store.put(t.item("x"))
    t.store.put(t.item("paused"))
    t.store.pause("paused")
    t.store.put(t.item("later", due_in=timedelta(minutes=5)))
    t.store.put(t.item("other", handler=OTHER))
    claims = claim_started(t.routes, A, t.lease, 10)
    assert [c.item.id for c in claims] == ["x"], f"claim_started took {claims}; only 'x' is due"
    [x] = claims
    history = t.store.history("x")
    assert len(history) == 1 and history[0].node == A and history[0].ended is None, (
        f"claim_started recorded no start: {history}"
    )
    assert claim_started(t.routes, B, t.lease, 10) == [], "a started claim was claimed again"
    [failed] = t.store.settle([Settlement(x, Redeliver(t.store.now() - _S, 1, "E: one"))])
    assert failed.applied, "a started claim's Redeliver did not apply"
    t.later(timedelta(milliseconds=10))  # two starts at one instant read as one attempt
    [again] = claim_started(t.routes, B, t.lease, 10)
    assert again.owner == B and again.attempt == 1, f"started again after a failure: {again}"
    outcomes = [(a.node, a.outcome) for a in t.store.history("x")]
    assert outcomes == [(A, "failed"), (B, None)], f"history of two started claims: {outcomes}"
    [done] = t.store.settle([Settlement(again, Completed())])
    assert done.applied and not t.store.exists("x"), "a started claim's Completed did not apply"


def _renew_release(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    t.store.put(t.item("y"))
    claims = t.store.claim_due(t.routes, A, t.lease, 10)
    t.later(_S)
    renewed = t.store.renew(claims, t.lease)
    assert len(renewed) == 2 and all(
        r.lease_until > c.lease_until for r, c in zip(renewed, claims, strict=True)
    ), f"renew did not extend: {claims} -> {renewed}"
    assert t.store.release(renewed[:1]) == 1, "release of a held claim"
    assert t.store.renew(renewed[:1], t.lease) == [], "renew of a released claim applied"
    again = t.store.claim_due(t.routes, B, t.lease, 10)
    assert [c.item.id for c in again] == [renewed[0].item.id], f"after release: {again}"


def _settle_outcomes(t: StoreTrial) -> None:
    for item_id in ("done", "retry", "dead"):
        t.store.put(t.item(item_id))
    claims = {c.item.id: c for c in t.store.claim_due(t.routes, A, t.lease, 10)}
    t.store.confirm_start(list(claims.values()))
    due = t.store.now() + timedelta(minutes=1)
    dead = DeadLetter(claims["dead"].item, 3, "E: gave up", t.store.now())
    results = t.store.settle(
        [
            Settlement(claims["done"], Completed()),
            Settlement(claims["retry"], Redeliver(due, 1, "E: boom")),
            Settlement(claims["dead"], DeadLettered(dead)),
        ]
    )
    assert [r.applied for r in results] == [True, True, True], f"settle: {results}"
    assert not t.store.exists("done") and not t.store.exists("dead"), "removed on settle"
    retried = t.store.get("retry")
    assert retried is not None and retried.due == due, f"redelivered form: {retried!r}"
    assert retried.generation == claims["retry"].generation, "Redeliver changed generation"
    assert t.store.claim_due(t.routes, A, t.lease, 10) == [], "a redelivery claimed early"
    assert [d.item.id for d in t.store.dead_letters()] == ["dead"], "dead letters"
    [ended] = t.store.history("retry")
    assert ended.outcome == "failed" and ended.error_type == "E", f"history: {ended}"
    [ok] = t.store.history("done")
    assert ok.outcome == "succeeded" and ok.ended is not None, f"history: {ok}"


def _settle_next_slot(t: StoreTrial) -> None:
    start = t.store.now() - timedelta(minutes=3)
    start = start.replace(microsecond=0)
    every = Recurrence.every(timedelta(minutes=1)).anchored(start)
    first = every.next_slot(start)
    t.store.put(ScheduleItem("r", ScheduleKind.TIMER, first, recurrence=every, handler=OTHER))
    [claim] = t.store.claim_due(frozenset({"h:" + OTHER}), A, t.lease, 10)
    due = t.store.now() + timedelta(minutes=1)
    applied = claim.item.due
    [result] = t.store.settle([Settlement(claim, NextSlot(applied, due))])
    moved = t.store.get("r")
    assert result.applied and moved is not None, f"NextSlot: {result}"
    assert moved.due == due and moved.previous == applied, f"NextSlot form: {moved!r}"
    assert moved.recurrence == every, f"recurrence after NextSlot: {moved.recurrence}"


def _runs_counted(t: StoreTrial) -> None:
    start = (t.store.now() - timedelta(minutes=3)).replace(microsecond=0)
    every = Recurrence.every(timedelta(minutes=1), max_runs=9).anchored(start)
    routes = frozenset({"h:" + OTHER})
    item = ScheduleItem(
        "r", ScheduleKind.TIMER, every.next_slot(start), recurrence=every, handler=OTHER, runs=2
    )
    t.store.put(item)
    stored = t.store.get("r")
    assert stored is not None and stored.runs == 2, f"runs after put: {stored!r}"
    [claim] = t.store.claim_due(routes, A, t.lease, 10)
    assert claim.item.runs == 2, f"a claim's runs: {claim.item.runs}"
    t.store.confirm_start([claim])
    slot, due = claim.item.due, t.store.now() - _S
    [result] = t.store.settle([Settlement(claim, NextSlot(slot, due, runs=3))])
    moved = t.store.get("r")
    assert result.applied and moved is not None and moved.runs == 3, (
        f"NextSlot(runs=3) applied {result.applied}, runs now {moved and moved.runs}"
    )
    [stale] = t.store.settle([Settlement(claim, NextSlot(slot, due, runs=7))])
    moved = t.store.get("r")
    assert not stale.applied and moved is not None and moved.runs == 3, "a stale NextSlot counted"
    [claim] = t.store.claim_due(routes, A, t.lease, 10)
    t.store.confirm_start([claim])
    t.store.settle([Settlement(claim, Redeliver(t.store.now() - _S, 1, "E: failed"))])
    again = t.store.get("r")
    assert again is not None and (again.runs, again.previous) == (3, slot), (
        f"a redelivery changed runs or the applied slot: {again!r}"
    )
    [claim] = t.store.claim_due(routes, A, t.lease, 10)
    assert claim.item.runs == 3, f"runs of the redelivered claim: {claim.item.runs}"
    assert t.store.release([claim]) == 1, "release of a held claim"
    [claim] = t.store.claim_due(routes, B, t.lease, 10)
    assert claim.item.runs == 3, f"a released claim changed runs: {claim.item.runs}"


def _next_due(t: StoreTrial) -> None:
    assert t.store.next_due(t.routes) is None, "next_due of an empty store"
    soon = t.store.put(t.item("soon", due_in=timedelta(minutes=5)))
    later = t.store.put(t.item("later", due_in=timedelta(minutes=9)))
    t.store.put(t.item("other", due_in=timedelta(minutes=1), handler=OTHER_HANDLER))
    assert t.store.next_due(t.routes) == soon.due, "next_due ignores other routes"
    t.store.pause("soon")
    assert t.store.next_due(t.routes) == later.due, "paused counted"
    assert t.store.next_due(t.routes, after=later.due) is None, "after"


def _dead_letters_requeue(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    [claim] = t.store.claim_due(t.routes, A, t.lease, 10)
    dead = DeadLetter(claim.item, 5, "E: no", t.store.now())
    t.store.settle([Settlement(claim, DeadLettered(dead))])
    [letter] = t.store.dead_letters()
    assert letter.attempts == 5 and letter.error == "E: no", f"dead letter: {letter}"
    assert t.store.requeue("nope", t.store.now()) is None, "requeue of an unknown id"
    back = t.store.requeue("x", t.store.now() - _S)
    assert back is not None and back.generation not in (0, claim.generation), f"requeued: {back!r}"
    assert t.store.dead_letters() == [], "a requeued item is still a dead letter"
    [again] = t.store.claim_due(t.routes, A, t.lease, 10)
    assert again.attempt == 0, f"requeued attempts: {again.attempt}"


def _history_bounded(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    for n in range(25):
        [claim] = t.store.claim_due(t.routes, A, t.lease, 10)
        t.store.confirm_start([claim])
        t.store.settle([Settlement(claim, Redeliver(t.store.now() - _S, n + 1, f"E: {n}"))])
    history = t.store.history("x")
    assert 1 <= len(history) <= 20, f"history holds {len(history)} attempts (at most 20)"
    assert history[-1].error_message == "24", f"the newest attempt last: {history[-1]}"
    t.store.remove("x")
    assert t.store.history("x") == history, "history lost when the item went"


def _timers_paging(t: StoreTrial) -> None:
    for n in range(7):
        t.store.put(t.item(f"t{n}", due_in=timedelta(minutes=7 - n), flow_id="f"))
    t.store.put(t.item("u", due_in=timedelta(minutes=1), flow_id="g"))
    t.store.pause("t0")
    page = t.store.timers(TimerSelection(flow_id="f", limit=3))
    seen = [i.id for i in page.items]
    assert seen == ["t6", "t5", "t4"], f"first page (soonest due first): {seen}"
    t.store.remove("t3")  # a timer gone between pages does not shift the cursor
    while page.next is not None:
        page = t.store.timers(TimerSelection(flow_id="f", limit=3, after=page.next))
        seen += [i.id for i in page.items]
    assert seen == ["t6", "t5", "t4", "t2", "t1", "t0"], f"paged: {seen}"
    paused = t.store.timers(TimerSelection(state="paused"))
    assert [i.id for i in paused.items] == ["t0"] and paused.next is None, "state filter"
    assert [i.id for i in t.store.timers(TimerSelection(id_prefix="u")).items] == ["u"]


def _pause_resume(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    assert t.store.pause("nope") is False and t.store.resume("nope") is False, "unknown id"
    assert t.store.pause("x") is True, "pause"
    assert t.store.exists("x"), "a paused item must still exist"
    assert t.store.claim_due(t.routes, A, t.lease, 10) == [], "a paused item was claimed"
    assert t.store.resume("x") is True, "resume"
    claims = t.store.claim_due(t.routes, A, t.lease, 10)
    assert [c.item.id for c in claims] == ["x"], f"a resumed past-due item: {claims}"


STORE_GUARANTEES: tuple[StoreCheck, ...] = (
    StoreCheck(
        "put gives each new form a fresh generation; get and exists see it", _put_generations
    ),
    StoreCheck("a replacement fences out claims of the old form", _replace_fences_claim),
    StoreCheck("remove is idempotent: True once, then False", _remove_idempotent),
    StoreCheck("remove with an older generation leaves the newer form", _remove_generation_fence),
    StoreCheck("a write past its deadline applies nothing", _deadline_fence),
    StoreCheck("remove_flow removes that flow's items only", _remove_flow),
    StoreCheck(
        "claim_due takes due, unpaused, unclaimed items of the given routes, soonest first",
        _claim_selects,
    ),
    StoreCheck("a claim is exclusive across two owners", _claim_exclusive),
    StoreCheck(
        "an expired lease is claimable again (by its owner too: a new token), attempt kept; "
        "the lapsed claim is stale, but for a late completion: a one-shot item's Completed "
        "settles its generation (fenced on id and generation alone) and says how late after "
        "its own lease",
        _expired_lease,
    ),
    LOST_RUNS,
    StoreCheck(
        "confirm_start keeps only claims still held and records their start", _confirm_start
    ),
    StoreCheck(
        "claim_started (where a store has it) claims as claim_due does and records each "
        "start in the same call",
        _claim_started,
    ),
    StoreCheck(
        "renew extends held leases; release frees them; stale ones apply nothing", _renew_release
    ),
    LOST_RENEWAL_REPLY,
    StoreCheck(
        "settle applies Completed, Redeliver and DeadLettered under the fence", _settle_outcomes
    ),
    StoreCheck(
        "settle applies NextSlot: same generation, next due, slot applied", _settle_next_slot
    ),
    StoreCheck(
        "a recurring item's runs: NextSlot counts them under the fence; a stale settle, a "
        "redelivery and a release leave them",
        _runs_counted,
    ),
    StoreCheck("next_due is the soonest claimable time of the given routes", _next_due),
    StoreCheck(
        "dead letters are listed and requeued under a fresh generation", _dead_letters_requeue
    ),
    StoreCheck(
        "history is bounded (at most 20), newest last, kept after removal", _history_bounded
    ),
    StoreCheck(
        "timers() is soonest due first with stable cursor paging and filters", _timers_paging
    ),
    StoreCheck("a paused item exists and is never claimed; resume makes it due", _pause_resume),
    LATE_SETTLE,
)
