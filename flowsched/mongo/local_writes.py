"""Internal: a node-local check that skips a claimed item this node has since cancelled/replaced.

A node claims a batch of items at once and runs their handlers one after another (or on a
pool). Between the claim and a handler's start, a handler of the same batch - or any other
thread of this node - may ``cancel``, ``cancel_flow`` or ``schedule`` over one of them. The
database fence (``_id`` + ``generation`` + claim token) already keeps the stale claim from
overwriting what replaced it, but it only acts when the outcome is written, after the
handler ran. This fence acts before the handler, without a round trip:

* every local ``schedule``/``cancel``/``requeue`` (by id) and ``cancel_flow`` (by flow)
  records a sequence number *after* its write to MongoDB (even a failed one: it may have
  applied);
* every claim takes a stamp (the current sequence number) *before* its query;
* right before a handler runs, a claim whose id or flow was touched after its stamp is
  skipped: its claim read the document before the write, or raced it.

A skipped claim is released (not settled as delivered or failed): the write is fenced on
the claimed generation and token, so it does nothing when the document was replaced or
deleted, and when the claim had in fact read the new form (the race) that form is given back
and delivered on a later sweep. Either way it is never counted as a lost delivery.

Across nodes there is no such check: a claimed item on another node is a delivery already
running, which may finish after ``cancel`` returned (the contract allows it); its outcome
is still fenced and never undoes the cancel or the replacement.

Bookkeeping is bounded: touches are recorded only while some claim is held, and entries no
held claim can be affected by are dropped.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from flowsched.records import ScheduleItem

__all__ = ["LocalWrites"]

_PRUNE_AT = 1024
"""Prune recorded touches once they exceed this many (and twice what the last prune kept)."""


class LocalWrites:
    """Sequence numbers of local writes by id and flow, and the stamps of held claims."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._ids: dict[Any, int] = {}
        self._flows: dict[str, int] = {}
        self._stamps: Counter[int] = Counter()
        self._limit = _PRUNE_AT

    def open(self, count: int = 1) -> int:
        """Take a stamp for a claim about to be made, held ``count`` times until :meth:`close`."""
        with self._lock:
            stamp = self._seq
            self._stamps[stamp] += count
            return stamp

    def hold(self, stamp: int, count: int) -> None:
        """Hold ``stamp`` ``count`` more times (one per claim handed to a worker)."""
        if count > 0:
            with self._lock:
                self._stamps[stamp] += count

    def close(self, stamp: int, count: int = 1) -> None:
        """Release ``count`` holds of ``stamp``; forget touches nothing held can care about."""
        with self._lock:
            left = self._stamps[stamp] - count
            if left > 0:
                self._stamps[stamp] = left
            else:
                del self._stamps[stamp]
            if not self._stamps:
                self._ids.clear()
                self._flows.clear()
                self._limit = _PRUNE_AT
            elif len(self._ids) + len(self._flows) > self._limit:
                self._prune(min(self._stamps))

    def touch(self, item_id: Any) -> None:
        """Record that this node has just written (scheduled, cancelled) ``item_id``."""
        with self._lock:
            self._seq += 1
            if self._stamps:
                self._ids[item_id] = self._seq

    def touch_flow(self, flow_id: str) -> None:
        """Record that this node has just cancelled every item of ``flow_id``."""
        with self._lock:
            self._seq += 1
            if self._stamps:
                self._flows[flow_id] = self._seq

    def stale(self, stamp: int, item: ScheduleItem) -> bool:
        """Whether ``item``, claimed under ``stamp``, was touched here since: do not deliver."""
        with self._lock:
            if self._ids.get(item.id, -1) > stamp:
                return True
            return item.flow_id is not None and self._flows.get(item.flow_id, -1) > stamp

    def _prune(self, oldest: int) -> None:
        self._ids = {k: seq for k, seq in self._ids.items() if seq > oldest}
        self._flows = {k: seq for k, seq in self._flows.items() if seq > oldest}
        self._limit = max(_PRUNE_AT, 2 * (len(self._ids) + len(self._flows)))
