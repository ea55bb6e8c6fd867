"""Internal: the store guarantee behind a node's count of lost runs (``Claim.lapsed``)."""

from __future__ import annotations

from datetime import timedelta

from flowsched.outcomes import Redeliver
from flowsched.store.records import Claim, Settlement
from flowsched.testing._store_trial import StoreCheck, StoreTrial

__all__ = ["LOST_RUNS"]

A, B = "node-a", "node-b"


def _by_id(claims: list[Claim]) -> dict[str, Claim]:
    return {claim.item.id: claim for claim in claims}


def _lost_runs(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    t.store.put(t.item("y"))
    first = _by_id(t.store.claim_due(t.routes, A, t.short, 10))
    assert [c.lapsed for c in first.values()] == [0, 0], f"fresh claims: {first}"
    assert t.store.confirm_start([first["x"]]) == [first["x"]], "a live claim was not confirmed"
    t.expire()  # x started and lapsed; y lapsed unstarted
    second = _by_id(t.store.claim_due(t.routes, B, t.short, 10))
    assert second["x"].lapsed == 1, (
        f"a claim of an item whose started run lapsed says lapsed={second['x'].lapsed}, not 1"
    )
    assert second["y"].lapsed == 0, (
        f"a claim that lapsed before it started was counted as a lost run: {second['y']}"
    )
    assert t.store.confirm_start([second["x"]]) == [second["x"]], "a live claim not confirmed"
    t.expire()  # x's second started run lapsed
    third = _by_id(t.store.claim_due(t.routes, A, t.lease, 10))
    assert third["x"].lapsed == 2, f"two lost runs in a row counted {third['x'].lapsed}"
    [renewed] = t.store.renew([third["x"]], t.lease)
    assert renewed.lapsed == 2, f"a renewal changed the count of lost runs: {renewed.lapsed}"
    assert t.store.release([renewed]) == 1, "a held claim was not released"
    [again] = [c for c in t.store.claim_due(t.routes, A, t.lease, 10) if c.item.id == "x"]
    assert again.lapsed == 2, f"a release changed the count of lost runs: {again.lapsed}"
    retry = Redeliver(t.store.now() - timedelta(seconds=1), 1, "DeliveryLost: lost twice")
    [settled] = t.store.settle([Settlement(again, retry)])
    assert settled.applied, "a held claim's Redeliver did not apply"
    [redelivered] = t.store.claim_due(t.routes, B, t.lease, 10)
    assert redelivered.lapsed == 0, (
        f"a settled item still counts lost runs after its settle: {redelivered.lapsed}"
    )
    t.store.put(t.item("y"))  # a new form (y is held by A): nothing lost yet
    [fresh] = t.store.claim_due(t.routes, B, t.lease, 10)
    assert fresh.item.id == "y" and fresh.lapsed == 0, f"a new form's claim: {fresh}"


LOST_RUNS = StoreCheck(
    "a claim counts the started runs of its form lost in a row (lapsed); an unstarted lapse, "
    "a release and a renewal count none; a settle and a new form start again from 0",
    _lost_runs,
)
