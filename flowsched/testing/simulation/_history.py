"""Internal: what happened in a simulation (claims, runs, client operations) and the
invariants of CONTRACT section 14, checked as each thing happens.

Time here is the reference (database) clock, in seconds since the simulation's start. A
claim's lease is judged as a correct cluster would hold it: from the moment its node wrote
``lease_until`` (claiming or renewing) for one ``lease``, whatever that node's clock said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["INVARIANTS", "Broken", "ClaimRecord", "History", "Run"]

DELIVERED = "every item delivered"
LEASE = "no attempt run twice while its lease is held"
STALE = "no stale delivery after a replace or cancel"
SLOTS = "recurring slots applied once"
EARLY = "no delivery before its due time"

INVARIANTS = (DELIVERED, LEASE, STALE, SLOTS, EARLY)
"""The invariants every simulation checks, in the order of CONTRACT section 14."""


@dataclass(frozen=True, slots=True)
class Broken:
    """A broken invariant: which, when (seconds of virtual time), and what was seen."""

    invariant: str
    at: float
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} (at {self.at:.3f}s): {self.detail}"


@dataclass(slots=True)
class ClaimRecord:
    """One item won by one claim (a token covers a whole batch)."""

    node: str
    item: str
    token: int
    seq: int
    claimed_at: float
    lease_end: float
    lease_raw: Any
    raw_token: str = ""
    stole: str | None = None
    settled: bool = False

    def live_at(self, now: float) -> bool:
        """Whether this claim still held its lease at ``now`` (as far as is known: a claim
        whose outcome was written holds nothing)."""
        return not self.settled and self.lease_end > now


@dataclass(slots=True)
class Run:
    """One handler call: of which item, generation (ordinal), attempt and slot, under which
    claim, from when to when (``None``: still running, or its node died in it)."""

    node: str
    item: str
    generation: int
    attempt: int
    slot: float | None
    claim: ClaimRecord | None
    start: float
    end: float | None = None
    ok: bool | None = None


@dataclass(slots=True)
class _Op:
    seq: int  # when it returned
    at: float
    node: str
    kind: str
    generation: int | None  # the new one (schedule), None (cancel)
    begun: int = 0  # when it was called

    def overlaps(self, other: _Op) -> bool:
        """Whether the two calls ran at once (a slow reply): either may have applied last."""
        return self.begun < other.seq and other.begun < self.seq


@dataclass
class History:
    """Everything recorded so far and the first broken invariant (``broken``)."""

    tolerance: float
    checks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(INVARIANTS, 0))
    broken: Broken | None = None
    seq: int = 0
    claims: dict[tuple[str, int], ClaimRecord] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    ops: dict[str, list[_Op]] = field(default_factory=dict)
    born: dict[tuple[str, int], int] = field(default_factory=dict)  # generation -> seq
    slots: dict[tuple[str, int, float], Run] = field(default_factory=dict)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def breaks(self, invariant: str, at: float, detail: str) -> None:
        if self.broken is None:
            self.broken = Broken(invariant, at, detail)

    # -- recording ---------------------------------------------------------------------

    def generation_seen(self, item: str, generation: int) -> None:
        """A generation of ``item`` exists from now on (at the latest)."""
        self.born.setdefault((item, generation), self.next_seq())

    def op(
        self, at: float, node: str, kind: str, item: str, generation: int | None, begun: int
    ) -> None:
        """A ``schedule`` (``generation``: the new one) or ``cancel`` of ``item``, called at
        sequence number ``begun``, returned."""
        if generation is not None:
            self.generation_seen(item, generation)
        record = _Op(self.next_seq(), at, node, kind, generation, begun)
        self.ops.setdefault(item, []).append(record)

    def last_op(self, item: str) -> _Op | None:
        ops = self.ops.get(item)
        return ops[-1] if ops else None

    def claimed(self, record: ClaimRecord, held_by: ClaimRecord | None) -> None:
        """``record`` was won; ``held_by``: the claim whose live lease it took, if any."""
        if held_by is not None:
            record.stole = (
                f"{held_by.node}'s lease on it (claimed at {held_by.claimed_at:.3f}s) was "
                f"held until {held_by.lease_end:.3f}s"
            )
        self.claims[(record.item, record.token)] = record

    # -- checks at a handler's start -----------------------------------------------------

    def started(self, run: Run, due: float) -> None:
        """Check a run as its handler starts (``due``: the due time or slot it runs for)."""
        self.runs.append(run)
        self._check_early(run, due)
        self._check_lease(run)
        self._check_stale(run)
        if run.slot is not None:
            self._check_slot(run)

    def _check_early(self, run: Run, due: float) -> None:
        self.checks[EARLY] += 1
        if run.start < due - self.tolerance:
            self.breaks(
                EARLY,
                run.start,
                f"{run.node} ran {run.item} at {run.start:.3f}s, {due - run.start:.3f}s before "
                f"its due time {due:.3f}s (tolerance {self.tolerance:g}s)",
            )

    def _check_lease(self, run: Run) -> None:
        self.checks[LEASE] += 1
        claim = run.claim
        if claim is None:
            return
        if run.start >= claim.lease_end:
            self.breaks(
                LEASE,
                run.start,
                f"{run.node} started {run.item} (generation #{run.generation}, attempt "
                f"{run.attempt}) at {run.start:.3f}s, after its own lease had ended at "
                f"{claim.lease_end:.3f}s: another node may hold or have run it",
            )
        elif claim.stole is not None:
            self.breaks(
                LEASE,
                run.start,
                f"{run.node} ran {run.item} (generation #{run.generation}, attempt "
                f"{run.attempt}) at {run.start:.3f}s under a claim that took a live lease: "
                f"{claim.stole}",
            )

    def _check_stale(self, run: Run) -> None:
        self.checks[STALE] += 1
        born = self.born.get((run.item, run.generation), 0)
        claim = run.claim
        for op in self.ops.get(run.item, ()):
            # Only a call made after this generation existed surely replaced or cancelled
            # it (one in flight meanwhile may have applied first).
            if op.begun <= born or op.generation == run.generation:
                continue
            # Contract: a delivery whose start was recorded before the call (a node starts
            # each claim as its store takes it) had already started; its handler may be
            # called while its claim's lease lasts (the claim's reply may come late) - on
            # the node the call was made on too: a node keeps no fence of its own writes.
            excused = claim is not None and claim.seq < op.seq and run.start < claim.lease_end
            if not excused:
                self.breaks(
                    STALE,
                    run.start,
                    f"{run.node} started {run.item} generation #{run.generation} at "
                    f"{run.start:.3f}s, after {op.kind} via {op.node} returned at {op.at:.3f}s",
                )
                return

    def _check_slot(self, run: Run) -> None:
        self.checks[SLOTS] += 1
        assert run.slot is not None
        key = (run.item, run.generation, run.slot)
        earlier = self.slots.get(key)
        if earlier is not None:
            self.breaks(
                SLOTS,
                run.start,
                f"slot {run.slot:.3f}s of {run.item} (generation #{run.generation}) ran again "
                f"on {run.node} at {run.start:.3f}s; {earlier.node} ran it at "
                f"{earlier.start:.3f}s",
            )
        else:
            self.slots[key] = run

    # -- the end -------------------------------------------------------------------------

    def undelivered(self, quiet: float, stored: set[str]) -> list[str]:
        """Items whose last (successful) operation left them owed a delivery that never
        came: a one-shot generation with no successful run, or still stored; a recurring
        one with no successful tick since ``quiet`` (when the faults ended)."""
        owed = []
        for item, ops in sorted(self.ops.items()):
            last = ops[-1]
            if any(op.overlaps(last) for op in ops[:-1]):
                # Which call applied last is not known to their callers: only an item left
                # stored after its last delivery would be wrong, whichever it was.
                # A recurring form among the concurrent calls may be the one stored: it
                # stays stored for ever, and is fine while it ticks.
                group = [op for op in ops if op is last or op.overlaps(last)]
                ticking = any(
                    op.kind == "schedule-recurring" and self._ran(item, op, since=quiet)
                    for op in group
                )
                owed_here = last.kind == "schedule" and item in stored and not ticking
                if owed_here and not self._ran(item, last):
                    owed.append(f"{item} is still stored, undelivered, after concurrent calls")
                continue
            if last.kind == "cancel":
                if item in stored:
                    owed.append(f"{item} is still stored after its cancel at {last.at:.3f}s")
                continue
            recurring = last.kind == "schedule-recurring"
            good = [
                run
                for run in self.runs
                if run.item == item
                and run.generation == last.generation
                and run.ok
                and (not recurring or run.start >= quiet)
            ]
            if not good:
                what = f"no tick since {quiet:.3f}s" if recurring else "never delivered"
                owed.append(f"{item} generation #{last.generation}: {what}")
            elif not recurring and item in stored:
                owed.append(f"{item} was delivered but is still stored")
        return owed

    def _ran(self, item: str, op: _Op, since: float | None = None) -> bool:
        return any(
            r.item == item
            and r.generation == op.generation
            and r.ok
            and (since is None or r.start >= since)
            for r in self.runs
        )

    def judge_delivered(self, at: float, quiet: float, stored: set[str]) -> None:
        self.checks[DELIVERED] += len(self.ops)
        owed = self.undelivered(quiet, stored)
        if owed:
            self.breaks(DELIVERED, at, "; ".join(owed[:3]) + ("; ..." if len(owed) > 3 else ""))
