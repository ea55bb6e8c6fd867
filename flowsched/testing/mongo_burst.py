"""Instrumentation of MongoDB nodes for a seam burst (:mod:`flowsched.testing.seam_burst`):
every check before a start is reported to the burst when it is sent.

A node's checks are of two kinds (both faces run the same procedures):

* a start check (:mod:`flowsched.mongo.start_check`): one ``find`` for the claims that
  waited in the queue, reported for each claim it covers;
* a claim that records the start of the claims it starts at once
  (:mod:`flowsched.mongo.claim_start`): reported, at the time the claiming update was sent,
  for the claims it *won* with a recorded start (a claim that failed to take a form - the
  form was replaced or cancelled first - is no check of another node's claim of it).

>>> with reported_checks(burst):  # doctest: +SKIP
...     report = burst.run(operations=300)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

__all__ = ["reported_checks"]


class Checked(Protocol):
    """What is told of each check (:meth:`flowsched.testing.seam_burst.SeamBurst.checked`)."""

    def checked(self, item_id: str, generation: int | None, sent: float | None = None) -> None: ...


@contextmanager
def reported_checks(burst: Checked) -> Iterator[None]:
    """Report to ``burst`` every check the MongoDB nodes of this process send, while the
    block runs (the procedures are patched, then restored)."""
    from flowsched.mongo import claims as claims_module
    from flowsched.mongo.claimed_batch import BatchClaimer
    from flowsched.mongo.start_check import StartChecks

    check_steps = StartChecks.check_steps
    take_claims = getattr(claims_module, "take_claims_steps")  # noqa: B009 (patched below)
    take_steps = BatchClaimer.take_steps
    lock = threading.Lock()
    sends: dict[tuple[str, str], float] = {}  # (token, repr id) -> when its claim was sent

    def checked(self: StartChecks, batch: Sequence[Any]) -> Any:
        for claim in batch:
            burst.checked(claim.item.id, claim.item.generation)
        return (yield from check_steps(self, batch))

    def claimed(*args: Any) -> Any:
        updates, starting = args[3], args[4]
        token = updates[0]["$set"]["claim"]["token"]
        sent = time.monotonic()
        with lock:
            sends.update(((token, key), sent) for key in starting)
        return (yield from take_claims(*args))

    def taken(self: BatchClaimer, *args: Any, **kwargs: Any) -> Any:
        batch = yield from take_steps(self, *args, **kwargs)
        for claim in batch.deliver:
            with lock:
                sent = sends.pop((claim.token, repr(claim.item.id)), None)
            if claim.started is not None and sent is not None:
                burst.checked(claim.item.id, claim.item.generation, sent)
        return batch

    StartChecks.check_steps = checked  # type: ignore[method-assign]
    setattr(claims_module, "take_claims_steps", claimed)  # noqa: B010 (the name claims calls)
    BatchClaimer.take_steps = taken  # type: ignore[method-assign]
    try:
        yield
    finally:
        StartChecks.check_steps = check_steps  # type: ignore[method-assign]
        setattr(claims_module, "take_claims_steps", take_claims)  # noqa: B010
        BatchClaimer.take_steps = take_steps  # type: ignore[method-assign]
