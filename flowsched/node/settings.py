"""Internal: how one node runs (:class:`NodeSettings`), and the hook it reports late
completions to - the node core's inputs (:mod:`flowsched.node.core`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from flowsched.store.records import Claim

__all__ = ["LAST_INSTANT", "LateHook", "NodeSettings"]

LateHook = Callable[[Claim, timedelta], None]

LAST_INSTANT = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """How one node runs: ``owner`` (its node id), handler slots, claim batch, lease;
    ``start_on_claim``: claims are started as they are claimed (``store.claim_started``);
    ``pace``: in a stream (two claims in a row found some, the last short), the next claim
    goes this long after the last, with no next-due call (0: a next-due call first)."""

    owner: str
    workers: int = 8
    batch_size: int = 100
    lease: timedelta = timedelta(seconds=30)
    poll_interval: timedelta = timedelta(seconds=1)
    start_on_claim: bool = False
    pace: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        for name in ("workers", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name in ("lease", "poll_interval"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise ValueError(f"{name} must be a positive timedelta, got {value!r}")
        if not isinstance(self.pace, timedelta) or self.pace < timedelta(0):
            raise ValueError(f"pace must be a timedelta, 0 or more, got {self.pace!r}")
