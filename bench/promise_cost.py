"""What two promises cost the MongoDB firing path: the same bench, with each switched off.

    python bench/promise_cost.py sync|async full|no-confirm|no-history|neither|bare URI

Runs ``async_mongo_bench``'s ``sync`` or ``async`` contender (2,000 timers due within 1 s
beside 1,000 an hour ahead, batches of 100; ``MongoScheduler`` with 8 worker threads or
``AsyncMongoScheduler``) in this process, after switching off, in this process only:

* ``no-confirm``: the check before a start (CONTRACT section 15: a claim waiting in a node's
  queue is not a started delivery). The store's ``confirm_start`` answers at once that every
  queued claim still holds, with no round trip, so a claim starts whatever happened to it
  since it was claimed - what main 989defa did. Only the threaded node confirms (the asyncio
  node and PostgreSQL start on claim), so it changes nothing there.
* ``no-history``: the attempt records a settle writes to ``<name>_history`` (section 18's
  ``history()``, which section 15 names as the way a caller learns that a delivery had
  already started). The settle's writes to the timers stay.
* ``neither``: both off. ``full``: nothing off (the shipped code).
* ``bare``: both off, and the claims' and settles' filters cut to 989defa's: a claim's
  ``update_many`` matches ``ready_at`` up to the latest value read (a range, as 989defa's
  up to its horizon; not the values read, which keep a lapsed run's count exact) and no
  ``attempts``; a settle's ``delete_many``
  matches the batch token alone (not the owner and generations, the fence that keeps a
  replacement from an old run's settle). What is left is the node core's own cost.
* ``bare-deep``: ``bare`` with batches of 200 (989defa claimed two batches of 100 at a
  time when behind; the node core holds at most ``workers + batch_size`` claims).

Prints the contender's JSON line (fired/s, round trips per fired timer, lateness).
Nothing here is a setting of flowsched: the switches are patches of this process's classes.
``bench/results/promise_cost.sh`` runs it beside main 989defa, rounds alternating.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import async_mongo_bench as amb

from flowsched.mongo.commands import Write
from flowsched.mongo.documents import truncate_ms
from flowsched.mongo.history import MongoHistory
from flowsched.mongo.timer_claims import ClaimSteps
from flowsched.store.records import Claim


def _unchecked_confirm(
    self: ClaimSteps, claims: Sequence[Claim]
) -> Generator[Any, Any, list[Claim]]:
    """Every queued claim started as it is, no round trip (989defa's start)."""
    self._started(claims, truncate_ms(self.time.now()))
    return list(claims)
    yield  # a generator, as the procedure it replaces


def _no_history_settle(
    self: MongoHistory,
    store: Any,
    writes: Sequence[Any],
    records: Sequence[Any],
    items: Callable[[Sequence[Any]], Generator[Any, Any, Any]],
) -> Generator[Any, Any, Any]:
    """The settle's writes to the items alone (their counts, for the settle)."""
    return (yield from items(writes))


def _no_history_write(
    self: MongoHistory, store: Any, records: Sequence[Any]
) -> Generator[Any, Any, None]:
    return
    yield


_fenced_writes = ClaimSteps._writes


def _bare_filter(found: Mapping[str, Any], delete: bool) -> dict[str, Any]:
    cut = dict(found)
    ready = cut.get("ready_at")
    if isinstance(ready, Mapping) and "$in" in ready:  # a claim: up to the latest read
        cut["ready_at"] = {"$lte": max(ready["$in"])}
        cut.pop("attempts", None)
    if delete and "claim.token" in cut:  # a settle: the token alone
        cut.pop("claim.owner", None)
        cut.pop("generation", None)
    return cut


def _bare_writes(self: ClaimSteps, role: str, writes: Sequence[Write]) -> Generator[Any, Any, Any]:
    if role == "items":
        writes = [
            replace(w, filter=_bare_filter(w.filter, w.update is None and w.replacement is None))
            for w in writes
        ]
    return (yield from _fenced_writes(self, role, writes))


VARIANTS = ("full", "no-confirm", "no-history", "neither", "bare", "bare-deep")


def switch_off(variant: str) -> None:
    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
    if variant in ("bare", "bare-deep"):
        ClaimSteps._writes = _bare_writes  # type: ignore[method-assign]
    if variant == "bare-deep":  # batches of 200: 989defa's claims when behind
        amb.BATCH = 2 * amb.BATCH
    if variant in ("no-confirm", "neither", "bare", "bare-deep"):
        ClaimSteps.confirm_start = _unchecked_confirm  # type: ignore[method-assign]
    if variant in ("no-history", "neither", "bare", "bare-deep"):
        MongoHistory.settle_steps = _no_history_settle  # type: ignore[method-assign]
        MongoHistory.write_steps = _no_history_write  # type: ignore[method-assign]


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("sync", "async"):
        raise SystemExit(__doc__)
    switch_off(sys.argv[2])
    print(json.dumps(amb.child(sys.argv[1], sys.argv[3])))
