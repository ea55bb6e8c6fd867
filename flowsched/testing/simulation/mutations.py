"""Planted bugs: known-wrong versions of the adapter's safety checks, applied by patching the
real code, that the simulator must catch (the mutation tests; ``flowsched simulate --plant``).

Each is a context manager; the code is restored on exit. Not for production use: they break
exactly what they are named for.

* ``settle-unfenced``: outcomes are written matching the item id only (no generation, no
  claim token): a stale settle deletes or moves what replaced it;
* ``claim-ignores-lease``: the claim takes items whose lease is still running;
* ``cancel-forgets-stamp``: ``cancel``/``schedule`` no longer stamp the local stale-claim
  fence (:class:`~flowsched.mongo.local_writes.LocalWrites`), so a claimed item this node has just
  cancelled or replaced still runs;
* ``tick-unchecked``: a recurring tick runs without moving (and checking) its applied slot
  (:meth:`~flowsched.mongo.claims.Claims.fence_slots`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from flowsched.mongo import claims as claims_module
from flowsched.mongo.claims import Claims
from flowsched.mongo.commands import Steps
from flowsched.mongo.local_writes import LocalWrites
from flowsched.mongo.settlement import Claim
from flowsched.mongo.store import Write

__all__ = ["PLANTED_BUGS", "planted"]

_FENCE_KEYS = ("claim.token", "generation")


@contextmanager
def _patched(owner: Any, name: str, replacement: Any) -> Iterator[None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _settle_unfenced() -> AbstractContextManager[None]:
    real = claims_module.settlement_writes  # type: ignore[attr-defined]

    def writes(settlements: Sequence[Any], store: Any) -> list[Write]:
        unfenced = []
        for write in real(settlements, store):
            bare = {k: v for k, v in write.filter.items() if k not in _FENCE_KEYS}
            unfenced.append(Write(bare, write.update, write.replacement, write.upsert, write.many))
        return unfenced

    return _patched(claims_module, "settlement_writes", writes)


@contextmanager
def _claim_ignores_lease() -> Iterator[None]:
    # The claim (and its renewals) record lease_until but leave ready_at - what the claim
    # query compares with now - at the item's due time: other nodes' claims pass over the
    # lease as if it were not there.
    real_take = Claims._take

    def take(
        self: Claims,
        ids: list[Any],
        where: dict[str, Any],
        update: dict[str, Any],
        due: Sequence[Any],
        now: datetime,
        started: tuple[dict[str, Any], frozenset[str]] | None = None,
    ) -> Steps[tuple[int, int]]:
        def unready(update: dict[str, Any]) -> dict[str, Any]:
            return {"$set": {k: v for k, v in update["$set"].items() if k != "ready_at"}}

        if started is not None:  # the claims it starts at once (their update records it)
            started = (unready(started[0]), started[1])
        return (yield from real_take(self, ids, where, unready(update), due, now, started))

    def renew(self: Claims, held: Sequence[tuple[Any, str]], now: datetime) -> int:
        if not held:
            return 0
        result = self.store.items.update_many(
            {
                **self.store.keys(sorted({item_id for item_id, _ in held}, key=repr)),
                "claim.token": {"$in": sorted({token for _, token in held})},
            },
            {"$set": {"claim.lease_until": now + self.lease}},
        )
        return int(result.modified_count)

    with _patched(Claims, "_take", take), _patched(Claims, "renew", renew):
        yield


def _cancel_forgets_stamp() -> AbstractContextManager[None]:
    def touch(self: LocalWrites, item_id: Any) -> None:
        return None

    return _patched(LocalWrites, "touch", touch)


def _tick_unchecked() -> AbstractContextManager[None]:
    def fence_slots_steps(self: Claims, claims: Sequence[Claim]) -> Steps[list[Claim]]:
        return list(claims)
        yield  # a procedure that makes no round trip

    return _patched(Claims, "fence_slots_steps", fence_slots_steps)


PLANTED_BUGS: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "settle-unfenced": _settle_unfenced,
    "claim-ignores-lease": _claim_ignores_lease,
    "cancel-forgets-stamp": _cancel_forgets_stamp,
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
