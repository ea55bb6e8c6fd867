"""Bursts of replaces and cancels on several nodes, checked against CONTRACT section 15: once
a replacing ``schedule`` or a cancel that answered ``True`` has returned, the old form never
starts, on any node.

:class:`SeamBurst` drives schedulers that share one store (each with its own client or
pool), in one process so that every event is read on one monotonic clock. Each item id
belongs to one driver thread (its operations are sequential, so its forms are numbered in
order); each operation goes through a node chosen at random, 10-30 ms after the last, and a
form falls due within one gap (about when the next operation on it comes), so the nodes
claim and start forms while newer ones are being written. The handler records the form and
the time it was called at its first line; each operation records when its call returned.

Two verdicts (:class:`BurstReport`):

* ``stale``: a handler called after its form's successor (a replace, or a cancel that
  answered ``True``) had returned. A node checks a claim and then calls its handler, so a
  start whose check reached the store first and whose successor returned before the handler
  was called is one the check could not stop (the contract's delivery that had already
  started; ``history`` shows it);
* ``unchecked``: of those, the starts whose claim was last checked by a check *sent after*
  the successor returned - the check must have found the claim gone, so each is a broken
  promise - and ``uncheck_started``: starts with no check at all. Known only when the node's
  checks are reported: :meth:`SeamBurst.checked`, called by instrumentation at the moment a
  check (a confirm) is sent.

>>> burst = SeamBurst([node_a, node_b, node_c])  # doctest: +SKIP
>>> report = burst.run(operations=300)  # doctest: +SKIP
>>> assert report.stale == [], report.describe()  # doctest: +SKIP
"""

from __future__ import annotations

import bisect
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from flowsched.port import SchedulerPort
from flowsched.records import ScheduleItem, ScheduleKind

__all__ = ["BurstReport", "SeamBurst", "StaleStart"]

HANDLER = "seam-burst"


@dataclass(frozen=True, slots=True)
class StaleStart:
    """Form ``form`` of ``item`` started ``late`` seconds after operation ``by`` (a replace
    by form ``by``, or a cancel numbered ``by``) had returned; ``checked``: how long before
    that return its claim's last check was sent (negative: after it; ``None``: unknown);
    ``recorded``: whether ``history(item)`` lists an attempt of this form."""

    item: str
    form: int
    by: int
    what: str
    late: float
    checked: float | None = None
    recorded: bool | None = None


@dataclass(frozen=True, slots=True)
class _BurstOp:
    item: str
    number: int
    what: str  # "replace" or "cancel"
    returned: float
    counts: bool  # a replace, or a cancel that answered True
    generation: int | None = None  # a replace's new form


@dataclass
class BurstReport:
    """What a burst did and found (see the module); ``unfired`` lists the items whose last
    form (a replace) had not started by the end of the settle time."""

    operations: int = 0
    replaces: int = 0
    cancels: int = 0
    cancels_true: int = 0
    starts: int = 0
    checks: int = 0
    errors: list[str] = field(default_factory=list)
    stale: list[StaleStart] = field(default_factory=list)
    unfired: list[str] = field(default_factory=list)
    uncheck_started: list[tuple[str, int]] = field(default_factory=list)
    """While checks are reported: the (item, form) started with no check sent before."""

    @property
    def unrecorded(self) -> list[StaleStart]:
        """The stale starts of which ``history`` lists no attempt: no start was recorded."""
        return [s for s in self.stale if s.recorded is False]

    @property
    def unchecked(self) -> list[StaleStart]:
        """The stale starts whose last check was sent after their successor returned."""
        return [s for s in self.stale if s.checked is not None and s.checked < 0]

    def describe(self) -> str:
        """One line of counts, then the first stale starts and errors."""
        head = (
            f"{self.operations} operations ({self.replaces} replaces, {self.cancels} cancels, "
            f"{self.cancels_true} True), {self.starts} starts, {self.checks} checks seen, "
            f"{len(self.stale)} stale ({len(self.unchecked)} checked after the successor "
            f"returned, {len(self.unrecorded)} not in history), "
            f"{len(self.uncheck_started)} started unchecked, "
            f"{len(self.unfired)} last forms unfired, {len(self.errors)} errors"
        )
        lines = [head]
        for s in self.stale[:10]:
            check = "?" if s.checked is None else f"{s.checked * 1000:.2f} ms before it"
            lines.append(
                f"  {s.item} form {s.form} started {s.late * 1000:.2f} ms after {s.what} "
                f"{s.by} returned; last check sent {check}; in history: {s.recorded}"
            )
        return "\n".join(lines + [f"  error: {e}" for e in self.errors[:5]])


class SeamBurst:
    """One burst over ``nodes`` (not yet started, sharing one store); see the module."""

    def __init__(self, nodes: Sequence[SchedulerPort], *, seed: int = 0) -> None:
        if not nodes:
            raise ValueError("SeamBurst needs at least one node, got none")
        self.nodes = list(nodes)
        self.seed = seed
        self._lock = threading.Lock()
        self._starts: list[tuple[str, int, float]] = []
        self._ops: list[_BurstOp] = []
        self._errors: list[str] = []
        self._checks: dict[tuple[str, int], list[float]] = {}

    def checked(self, item_id: str, generation: int | None) -> None:
        """Instrumentation: a check (confirm) of the claim of ``item_id``'s form
        ``generation`` is being sent now."""
        if generation is None:
            return
        sent = time.monotonic()
        with self._lock:
            self._checks.setdefault((item_id, generation), []).append(sent)

    def handler(self, item: ScheduleItem, attempt: int) -> None:
        called = time.monotonic()  # first: the start, on the shared clock
        payload = item.payload or {}
        with self._lock:
            self._starts.append((item.id, int(payload.get("form", -1)), called))

    def run(
        self,
        *,
        operations: int = 300,
        items: int = 6,
        gap: tuple[float, float] = (0.010, 0.030),
        settle: float = 30.0,
    ) -> BurstReport:
        """Register the recording handler on each node, start them, run ``operations``
        replaces (70 %) and cancels (30 %) on ``items`` ids from one driver thread per node,
        ``gap`` seconds apart, then wait up to ``settle`` seconds for every last form to
        start. The caller closes the nodes."""
        if operations < 1 or items < len(self.nodes):
            raise ValueError(
                f"SeamBurst.run needs operations >= 1 and items >= {len(self.nodes)} (one per "
                f"node); got operations={operations}, items={items}"
            )
        for node in self.nodes:
            node.register(HANDLER, self.handler)
        for node in self.nodes:
            node.start()
        tag = f"sb{self.seed}-{random.Random().getrandbits(24):06x}"
        ids = [f"{tag}-{n}" for n in range(items)]
        width = len(self.nodes)
        lanes = [
            threading.Thread(
                target=self._lane,
                args=(ids[k::width], operations // width, gap, self.seed * 101 + k),
                name=f"seam-burst-{k}",
            )
            for k in range(width)
        ]
        for lane in lanes:
            lane.start()
        for lane in lanes:
            lane.join()
        deadline = time.monotonic() + settle
        while self._unfired() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self._report(deadline)

    def _lane(self, ids: list[str], count: int, gap: tuple[float, float], seed: int) -> None:
        rng = random.Random(seed)
        number = dict.fromkeys(ids, 0)
        for _ in range(count):
            item_id, node = rng.choice(ids), rng.choice(self.nodes)
            number[item_id] += 1
            n = number[item_id]
            try:
                if rng.random() < 0.7:
                    due = datetime.now(UTC) + timedelta(seconds=rng.uniform(0, gap[1]))
                    payload = {"form": n}
                    form = ScheduleItem(item_id, ScheduleKind.TIMER, due, payload=payload,
                                        handler=HANDLER)  # fmt: skip
                    generation = node.schedule(form).generation
                    op = _BurstOp(item_id, n, "replace", time.monotonic(), True, generation)
                else:
                    removed = node.cancel(item_id)
                    op = _BurstOp(item_id, n, "cancel", time.monotonic(), removed)
            except Exception as exc:  # an outage: the operation's outcome is unknown
                with self._lock:
                    self._errors.append(f"{item_id} #{n}: {type(exc).__name__}: {exc}")
                continue
            with self._lock:
                self._ops.append(op)
            time.sleep(rng.uniform(*gap))

    def _unfired(self) -> list[str]:
        with self._lock:
            started = {(item, form) for item, form, _ in self._starts}
            last = {op.item: op for op in self._ops}
        return sorted(
            op.item
            for op in last.values()
            if op.what == "replace" and (op.item, op.number) not in started
        )

    def _report(self, deadline: float) -> BurstReport:
        with self._lock:
            starts, ops, checks = list(self._starts), list(self._ops), dict(self._checks)
        report = BurstReport(
            operations=len(ops) + len(self._errors),
            replaces=sum(op.what == "replace" for op in ops),
            cancels=sum(op.what == "cancel" for op in ops),
            cancels_true=sum(op.what == "cancel" and op.counts for op in ops),
            starts=len(starts),
            checks=sum(len(sent) for sent in checks.values()),
            errors=list(self._errors),
            unfired=self._unfired(),
        )
        generation = {(op.item, op.number): op.generation for op in ops if op.what == "replace"}
        successors: dict[str, list[_BurstOp]] = {}
        for op in ops:
            if op.counts:
                successors.setdefault(op.item, []).append(op)
        for item_id, form, called in starts:
            sent = sorted(checks.get((item_id, generation.get((item_id, form)) or 0), []))
            before_call = sent[: bisect.bisect_right(sent, called)]
            if report.checks and not before_call:
                report.uncheck_started.append((item_id, form))
            after = [op for op in successors.get(item_id, []) if op.number > form]
            if not after or after[0].returned >= called:
                continue
            first = after[0]  # the first successor, in issue order: it returned first
            checked = first.returned - before_call[-1] if before_call else None
            late = called - first.returned
            recorded = self._recorded(item_id, generation.get((item_id, form)), deadline)
            report.stale.append(
                StaleStart(item_id, form, first.number, first.what, late, checked, recorded)
            )
        return report

    def _recorded(self, item_id: str, generation: int | None, deadline: float) -> bool | None:
        """Whether ``history`` lists the attempt (asked again until ``deadline``: a node may
        write an attempt with its next settlement)."""
        while True:
            try:
                attempts = self.nodes[0].history(item_id)
            except NotImplementedError:
                return None
            if any(attempt.generation == generation for attempt in attempts):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
