"""Internal: the late completions of the MongoDB timer stores' ``settle``
(:mod:`flowsched.mongo.timer_claims`), as a procedure without I/O.

A one-shot item's run that succeeded after its lease ended, while another claim took the
item (a paused node: :attr:`~flowsched.store.Settlement.settles_late`), is not stale: it
settles its generation. Its document is deleted fenced on ``_id`` and ``generation`` alone,
whoever holds it now; a replaced or cancelled form is never touched. Rare, so exact rather
than batched: one ``find`` of the candidates' generations, then one ``delete_one`` per
document still of its claim's generation (its count says whether it applied: a cancel or
replace in between wins).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowsched.mongo.commands import Find, Steps, Write, counted_write_steps
from flowsched.mongo.store import MongoCollections
from flowsched.store.records import Settlement

__all__ = ["late_completions"]


def late_completions(
    settlements: Sequence[Settlement], applied: dict[int, bool], roles: MongoCollections
) -> Steps[None]:
    """Apply the late completions among ``settlements`` that the batch did not (``applied``,
    by ``id()``, set True for each one applied here)."""
    late = [s for s in settlements if not applied.get(id(s)) and s.settles_late]
    if not late:
        return
    ids = list(dict.fromkeys(s.claim.item.id for s in late))
    found: list[dict[str, Any]] = yield Find(
        "items", roles.keyed({"_id": {"$in": ids}}), {"generation": 1}
    )
    stored = {doc["_id"]: doc.get("generation") for doc in found}
    for s in late:
        claim = s.claim
        if stored.get(claim.item.id) == claim.generation:
            fence = roles.keyed({"_id": claim.item.id, "generation": claim.generation})
            counts = yield from counted_write_steps("items", [Write(fence)], roles.bulk)
            applied[id(s)] = counts.deleted == 1
