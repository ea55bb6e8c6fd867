"""Bursts of replaces and cancels on several nodes, checked against CONTRACT section 15: once
a replacing ``schedule`` or a cancel that answered ``True`` has returned, the old form never
starts, on any node.

:class:`SeamBurst` (threads) and :class:`AsyncSeamBurst` (asyncio) drive schedulers that
share one store (each with its own client or pool), in one process so that every event is
read on one monotonic clock. Each item id belongs to one driver lane (its operations are
sequential, so its forms are numbered in order); each operation goes through a node chosen
at random, 10-30 ms after the last, and a form falls due within one gap (about when the
next operation on it comes), so the nodes claim and start forms while newer ones are being
written. The handler records the form and
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

import asyncio
import bisect
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from flowsched.async_port import AsyncSchedulerPort
from flowsched.port import SchedulerPort
from flowsched.records import ScheduleItem, ScheduleKind
from flowsched.steering import Attempt

__all__ = ["AsyncSeamBurst", "BurstReport", "SeamBurst", "StaleStart"]

HANDLER = "seam-burst"


@dataclass(frozen=True, slots=True)
class StaleStart:
    """Form ``form`` of ``item`` started ``late`` seconds after operation ``by`` (a replace
    by form ``by``, or a cancel numbered ``by``) had returned; ``checked``: how long before
    that return its claim's last check was sent (negative: after it; ``None``: unknown);
    ``recorded``: whether ``history(item)`` lists an attempt of this form; ``generation``:
    the form's, as its ``schedule`` returned it."""

    item: str
    form: int
    by: int
    what: str
    late: float
    checked: float | None = None
    recorded: bool | None = None
    generation: int | None = None


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

    def assert_kept(self) -> None:
        """Raise ``AssertionError`` (with :meth:`describe`) unless the burst kept section 15:
        it started and checked something, no call failed, every start was checked, no check
        was sent after its successor returned, every late start is in ``history()`` (the
        caller's way to learn of it), and every last form fired."""
        text = self.describe()
        assert self.errors == [], text
        assert self.starts > 0 and self.checks > 0, text
        assert self.uncheck_started == [], text
        assert self.unchecked == [], text
        assert self.unrecorded == [], text
        assert self.unfired == [], text

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


@dataclass(frozen=True, slots=True)
class _Step:
    """One planned operation: a replace due ``due_in`` seconds after its call (``None``: a
    cancel), then a pause of ``pause`` seconds."""

    item: str
    node: int
    number: int
    due_in: float | None
    pause: float


class _BurstLog:
    """What a burst records, and its verdicts; :class:`SeamBurst` and
    :class:`AsyncSeamBurst` drive the nodes."""

    def __init__(self, width: int, seed: int) -> None:
        if width < 1:
            raise ValueError("a seam burst needs at least one node, got none")
        self.width, self.seed = width, seed
        self._lock = threading.Lock()
        self._starts: list[tuple[str, int, float]] = []
        self._ops: list[_BurstOp] = []
        self._errors: list[str] = []
        self._checks: dict[tuple[str, int], list[float]] = {}
        self._generations: dict[tuple[str, int], int | None] = {}

    def checked(self, item_id: str, generation: int | None, sent: float | None = None) -> None:
        """Instrumentation: a check (a confirm, or a claim that records the start) of the
        claim of ``item_id``'s form ``generation`` was sent at ``sent`` (``time.monotonic()``;
        default: now)."""
        if generation is None:
            return
        sent = time.monotonic() if sent is None else sent
        with self._lock:
            self._checks.setdefault((item_id, generation), []).append(sent)

    def handler(self, item: ScheduleItem, attempt: int) -> None:
        called = time.monotonic()  # first: the start, on the shared clock
        payload = item.payload or {}
        with self._lock:
            self._starts.append((item.id, int(payload.get("form", -1)), called))

    def _lanes(self, operations: int, items: int, gap: tuple[float, float]) -> list[list[_Step]]:
        """Each lane's operations: its own ids, a node at random for each, 70 % replaces
        (each form due within one gap: about when the next operation on it comes)."""
        if operations < 1 or items < self.width:
            raise ValueError(
                f"a seam burst needs operations >= 1 and items >= {self.width} (one per "
                f"node); got operations={operations}, items={items}"
            )
        tag = f"sb{self.seed}-{random.Random().getrandbits(24):06x}"
        ids = [f"{tag}-{n}" for n in range(items)]
        lanes = []
        for k in range(self.width):
            rng, mine = random.Random(self.seed * 101 + k), ids[k :: self.width]
            number = dict.fromkeys(mine, 0)
            steps = []
            for _ in range(operations // self.width):
                item_id, node = rng.choice(mine), rng.randrange(self.width)
                number[item_id] += 1
                due_in = rng.uniform(0, gap[1]) if rng.random() < 0.7 else None
                steps.append(_Step(item_id, node, number[item_id], due_in, rng.uniform(*gap)))
            lanes.append(steps)
        return lanes

    @staticmethod
    def _form(step: _Step) -> ScheduleItem:
        due = datetime.now(UTC) + timedelta(seconds=step.due_in or 0.0)
        return ScheduleItem(step.item, ScheduleKind.TIMER, due, payload={"form": step.number},
                            handler=HANDLER)  # fmt: skip

    def _done(self, step: _Step, result: ScheduleItem | bool | BaseException) -> None:
        returned = time.monotonic()
        with self._lock:
            if isinstance(result, BaseException):  # an outage: the outcome is unknown
                self._errors.append(f"{step.item} #{step.number}: {type(result).__name__}")
            elif isinstance(result, ScheduleItem):
                op = _BurstOp(step.item, step.number, "replace", returned, True, result.generation)
                self._ops.append(op)
            else:
                self._ops.append(_BurstOp(step.item, step.number, "cancel", returned, result))

    def _unfired(self) -> list[str]:
        with self._lock:
            started = {(item, form) for item, form, _ in self._starts}
            last = {op.item: op for op in self._ops}
        return sorted(
            op.item
            for op in last.values()
            if op.what == "replace" and (op.item, op.number) not in started
        )

    def _report(self) -> BurstReport:
        """The verdicts; ``recorded`` is left ``None`` for the driver to ask ``history``."""
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
        self._generations = {(o.item, o.number): o.generation for o in ops if o.what == "replace"}
        successors: dict[str, list[_BurstOp]] = {}
        for op in ops:
            if op.counts:
                successors.setdefault(op.item, []).append(op)
        for item_id, form, called in starts:
            sent = sorted(checks.get((item_id, self._generation(item_id, form) or 0), []))
            before_call = sent[: bisect.bisect_right(sent, called)]
            if report.checks and not before_call:
                report.uncheck_started.append((item_id, form))
            after = [op for op in successors.get(item_id, []) if op.number > form]
            if not after or after[0].returned >= called:
                continue
            first = after[0]  # the first successor, in issue order: it returned first
            checked = first.returned - before_call[-1] if before_call else None
            late = called - first.returned
            generation = self._generation(item_id, form)
            report.stale.append(
                StaleStart(item_id, form, first.number, first.what, late, checked, None, generation)
            )
        return report

    def _generation(self, item_id: str, form: int) -> int | None:
        return self._generations.get((item_id, form))

    def _lists(self, stale: StaleStart, attempts: Sequence[Attempt]) -> bool:
        generation = self._generation(stale.item, stale.form)
        return any(attempt.generation == generation for attempt in attempts)


class SeamBurst(_BurstLog):
    """One burst over ``nodes`` (not yet started, sharing one store); see the module."""

    def __init__(self, nodes: Sequence[SchedulerPort], *, seed: int = 0) -> None:
        super().__init__(len(nodes), seed)
        self.nodes = list(nodes)

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
        start (and ``history`` to list the stale starts). The caller closes the nodes."""
        lanes = self._lanes(operations, items, gap)
        for node in self.nodes:
            node.register(HANDLER, self.handler)
        for node in self.nodes:
            node.start()
        threads = [threading.Thread(target=self._lane, args=(lane,)) for lane in lanes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        deadline = time.monotonic() + settle
        while self._unfired() and time.monotonic() < deadline:
            time.sleep(0.05)
        report = self._report()
        report.stale = [replace(s, recorded=self._recorded(s, deadline)) for s in report.stale]
        return report

    def _lane(self, steps: list[_Step]) -> None:
        for step in steps:
            node = self.nodes[step.node]
            try:
                if step.due_in is None:
                    self._done(step, node.cancel(step.item))
                else:
                    self._done(step, node.schedule(self._form(step)))
            except Exception as exc:
                self._done(step, exc)
            time.sleep(step.pause)

    def _recorded(self, stale: StaleStart, deadline: float) -> bool | None:
        """Whether ``history`` lists the attempt (asked again until ``deadline``: a node may
        write an attempt with its next settlement)."""
        while True:
            try:
                if self._lists(stale, self.nodes[0].history(stale.item)):
                    return True
            except NotImplementedError:
                return None
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


class AsyncSeamBurst(_BurstLog):
    """:class:`SeamBurst` over asyncio schedulers, on the running loop (one task per node)."""

    def __init__(self, nodes: Sequence[AsyncSchedulerPort], *, seed: int = 0) -> None:
        super().__init__(len(nodes), seed)
        self.nodes = list(nodes)

    async def run(
        self,
        *,
        operations: int = 300,
        items: int = 6,
        gap: tuple[float, float] = (0.010, 0.030),
        settle: float = 30.0,
    ) -> BurstReport:
        """:meth:`SeamBurst.run` on the running loop; the caller closes the nodes."""
        lanes = self._lanes(operations, items, gap)
        for node in self.nodes:
            node.register(HANDLER, self.handler)
        for node in self.nodes:
            await node.start()
        await asyncio.gather(*(self._lane(lane) for lane in lanes))
        deadline = time.monotonic() + settle
        while self._unfired() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        report = self._report()
        report.stale = [
            replace(s, recorded=await self._recorded(s, deadline)) for s in report.stale
        ]
        return report

    async def _lane(self, steps: list[_Step]) -> None:
        for step in steps:
            node = self.nodes[step.node]
            try:
                if step.due_in is None:
                    self._done(step, await node.cancel(step.item))
                else:
                    self._done(step, await node.schedule(self._form(step)))
            except Exception as exc:
                self._done(step, exc)
            await asyncio.sleep(step.pause)

    async def _recorded(self, stale: StaleStart, deadline: float) -> bool | None:
        while True:
            try:
                if self._lists(stale, await self.nodes[0].history(stale.item)):
                    return True
            except NotImplementedError:
                return None
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)
