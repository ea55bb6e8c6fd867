"""Internal: the store guarantees about a claim's lease end - fenced by the claim's identity,
not its remembered lease end, and a settle after the lease that nobody re-claimed."""

from __future__ import annotations

from datetime import timedelta

from flowsched.outcomes import Completed
from flowsched.store.records import Settlement
from flowsched.testing._store_trial import StoreCheck, StoreTrial

__all__ = ["LATE_SETTLE", "LOST_RENEWAL_REPLY"]

A = "node-a"
_S = timedelta(seconds=1)


def _lost_renewal_reply(t: StoreTrial) -> None:
    for item_id in ("x", "y", "z"):
        t.store.put(t.item(item_id))
    claims = t.store.claim_due(t.routes, A, t.short, 10)
    assert len({c.token for c in claims}) == 3, f"claims share a token: {claims}"
    t.later(_S)
    # The renewal applies but its reply is "lost": the node keeps `claims`, whose lease end
    # then passes while the stored one lasts.
    renewed = t.store.renew(claims, timedelta(minutes=5))
    assert [r.token for r in renewed] == [c.token for c in claims], f"renew: {renewed}"
    t.expire()
    x, y, z = claims
    assert t.store.confirm_start([x]) == [x], "a claim from before its renewal not confirmed"
    assert len(t.store.renew([y], t.lease)) == 1, "a claim from before its renewal not renewed"
    results = t.store.settle([Settlement(x, Completed()), Settlement(y, Completed())])
    assert all(r.applied and r.late is None for r in results), (
        f"a claim from before its renewal did not settle in time (by the stored lease): {results}"
    )
    assert not t.store.exists("x") and not t.store.exists("y"), "settled items still stored"
    assert t.store.release([z]) == 1, "a claim from before its renewal not released"


def _late_settle(t: StoreTrial) -> None:
    t.store.put(t.item("x"))
    [claim] = t.store.claim_due(t.routes, A, t.short, 10)
    t.store.confirm_start([claim])
    t.expire()
    [result] = t.store.settle([Settlement(claim, Completed())])
    assert result.applied, "a settle after the lease, nobody else claiming, must apply"
    assert result.late is not None and result.late > timedelta(0), f"late: {result.late}"


LOST_RENEWAL_REPLY = StoreCheck(
    "a claim is fenced by its identity (id, generation, owner, token), not its lease end: "
    "after a renewal whose reply was lost, the old claim still confirms, renews, settles "
    "in time and releases",
    _lost_renewal_reply,
)
LATE_SETTLE = StoreCheck(
    "a settle after the lease applies when nobody re-claimed and says how late", _late_settle
)
