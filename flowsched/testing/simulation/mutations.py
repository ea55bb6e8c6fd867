"""Planted bugs: known-wrong versions of the MongoDB timer store's safety checks, applied by
patching the real code (:mod:`flowsched.mongo.timer_claims`), that the simulator must catch
(the mutation tests; ``flowsched simulate --plant``).

Each is a context manager; the code is restored on exit. Not for production use: they break
exactly what they are named for.

* ``settle-unfenced``: the store's settle writes (a completion's delete, a redelivery's or
  next slot's update) match the item id only (no generation, owner or claim token): a stale
  settle deletes or moves the form that replaced it;
* ``claim-ignores-lease``: the store's claim takes items whose lease still runs (claims and
  renewals record ``claim.lease_until`` but leave ``ready_at`` - what the claim query
  compares with now - at the item's due time);
* ``tick-unchecked``: a recurring tick's settle does not record the slot it applied and
  leaves the item waiting at that slot (instead of the next): the tick's slot is not fenced,
  and runs again.

(The sweepers' ``cancel-forgets-stamp``, which skipped the local stale-claim fence, has no
equivalent: the nodes hold no queued claims - a ``MongoScheduler`` starts each claim as its
store takes it, ``claim_started`` being the check - and a queued claim started without its
confirm is planted in the node core's own simulation, :mod:`flowsched.testing.node_simulation`
``"no-confirm"``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from flowsched.mongo import timer_claims
from flowsched.mongo.commands import Steps, Write
from flowsched.mongo.documents import truncate_ms
from flowsched.mongo.timer_claims import ClaimSteps
from flowsched.outcomes import NextSlot
from flowsched.store.records import Settlement

__all__ = ["PLANTED_BUGS", "planted"]

_FENCE_KEYS = ("generation", "claim.owner", "claim.token")


@contextmanager
def _patched(owner: Any, name: str, replacement: Any) -> Iterator[None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _real(name: str) -> Any:
    """The function ``name`` of :mod:`flowsched.mongo.timer_claims` (its own import)."""
    return vars(timer_claims)[name]


def _bare(write: Write) -> Write:
    """``write`` matching on ``_id`` only."""
    found = {k: v for k, v in write.filter.items() if k not in _FENCE_KEYS}
    return Write(found, write.update, write.replacement, write.upsert, write.many)


@contextmanager
def _settle_unfenced() -> Iterator[None]:
    real_held, real_settle = _real("held_writes"), _real("settle_write")

    def held_writes(claims: Sequence[Any], live: Any, fields: Any, **kw: Any) -> list[Write]:
        writes = real_held(claims, live, fields, **kw)
        return [_bare(w) for w in writes] if fields is None else writes  # None: settle's

    def settle_write(settlement: Any, mark: str) -> Write:
        return _bare(real_settle(settlement, mark))

    with (
        _patched(timer_claims, "held_writes", held_writes),
        _patched(timer_claims, "settle_write", settle_write),
    ):
        yield


def _set_of(write: Write) -> Mapping[str, Any]:
    update = write.update or {}
    value = update.get("$set")
    return value if isinstance(value, Mapping) else {}


def _claims_or_renewal(write: Write) -> bool:
    fields = _set_of(write)
    return isinstance(fields.get("claim"), Mapping) or "claim.lease_until" in fields


def _claim_ignores_lease() -> AbstractContextManager[None]:
    real = ClaimSteps._writes

    def unready(write: Write) -> Write:
        if not _claims_or_renewal(write):
            return write  # a settle or release: ready_at moves as it should
        update = dict(write.update or {})
        update["$set"] = {k: v for k, v in _set_of(write).items() if k != "ready_at"}
        return Write(write.filter, update, write.replacement, write.upsert, write.many)

    def writes(self: ClaimSteps, role: str, batch: Sequence[Write]) -> Steps[Any]:
        return (yield from real(self, role, [unready(w) for w in batch]))

    return _patched(ClaimSteps, "_writes", writes)


def _tick_unchecked() -> AbstractContextManager[None]:
    real = _real("settle_write")

    def settle_write(settlement: Settlement, mark: str) -> Write:
        write: Write = real(settlement, mark)
        outcome = settlement.outcome
        if not isinstance(outcome, NextSlot) or outcome.applied is None:
            return write
        if outcome.applied == settlement.claim.item.previous:
            return write  # no slot ran (none due yet): nothing to fence
        # The slot that ran is where the item waits again, and not recorded as applied.
        ran = truncate_ms(outcome.applied)
        fields = {**_set_of(write), "due": ran, "ready_at": ran}
        fields.pop("applied", None)
        return Write(write.filter, {**(write.update or {}), "$set": fields})

    return _patched(timer_claims, "settle_write", settle_write)


PLANTED_BUGS: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "settle-unfenced": _settle_unfenced,
    "claim-ignores-lease": _claim_ignores_lease,
    "tick-unchecked": _tick_unchecked,
}
"""Each planted bug by name: a function returning the context manager that applies it."""


def planted(name: str) -> AbstractContextManager[None]:
    """Apply the planted bug ``name`` (see the module docstring) while the block runs.

    >>> with planted("settle-unfenced"):                     # doctest: +SKIP
    ...     simulate(3).ok
    False
    """
    try:
        factory = PLANTED_BUGS[name]
    except KeyError:
        raise ValueError(
            f"unknown planted bug {name!r}: expected one of {', '.join(PLANTED_BUGS)}"
        ) from None
    return factory()
