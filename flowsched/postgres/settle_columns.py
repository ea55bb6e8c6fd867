"""Internal: the settle statement's parallel arrays - one column per field of a batch of
outcomes, so that a batch of any size is one statement (see ``settle`` in ``queries.sql``) -
and what its rows say of each settlement.

Each :class:`~flowsched.store.Settlement` becomes one row of the arrays: its claim's fence
(its identity: id, generation, owner, token), the action (``complete``, ``redeliver``, ``next``,
``dead``) with its values (a ``next``'s runs among them), and how its history attempt ends.
The usual batch, every handler returned (:func:`completed_columns`), sends the fences and the
claims' attempts only (``settle_completed``). The arrays of known element types go as
:mod:`flowsched.postgres.arrays` (dumped in one go).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from flowsched.outcomes import Completed, DeadLettered, Exhausted, NextSlot, Outcome, Redeliver
from flowsched.postgres.arrays import Int8Array, TextArray
from flowsched.postgres.plans import Row
from flowsched.postgres.rows import utc
from flowsched.store.records import Claim, Settlement, SettleResult

__all__ = [
    "CLOSE_COLUMNS",
    "completed_columns",
    "fences",
    "plainly_completed",
    "settle_columns",
    "settled",
]

CLOSE_COLUMNS = ("outcomes", "error_types", "messages", "tracebacks")
"""The columns of :func:`settle_columns` that say how an attempt ended (``close_kept``)."""


def fences(claims: Sequence[Claim]) -> dict[str, list[Any]]:
    """The fence columns of ``claims``: ids, generations, owners, tokens."""
    items = [claim.item for claim in claims]
    return {
        "ids": TextArray([item.id for item in items]),
        "generations": Int8Array([item.generation for item in items]),
        "owners": TextArray([claim.owner for claim in claims]),
        "tokens": TextArray([claim.token for claim in claims]),
    }


def completed_columns(settlements: Sequence[Settlement]) -> dict[str, list[Any]] | None:
    """The ``settle_completed`` statement's columns (the claims' fences) if every one of
    ``settlements`` is :func:`plainly_completed`; else ``None``."""
    if not all(plainly_completed(s) for s in settlements):
        return None
    return fences([settlement.claim for settlement in settlements])


# A SettleResult built field by field (its slots' own setters: half a frozen dataclass's
# __init__, once per timer settled). Its fields, in order, are checked here.
_RESULT_FIELDS = ("claim", "applied", "late")
assert tuple(f.name for f in fields(SettleResult)) == _RESULT_FIELDS, "SettleResult changed"
_new = object.__new__
_set_claim, _set_applied, _set_late = (
    SettleResult.__dict__[name].__set__ for name in _RESULT_FIELDS
)


def settled(settlements: Sequence[Settlement], rows: list[Row]) -> list[SettleResult]:
    """What the settle statement's ``rows`` - ``(id, now, lease_until, claim_token)`` of each
    row it applied - say of each of ``settlements``, in order (a row's ``lease_until`` is its
    stored lease end: a renewal whose reply was lost may have moved it past the claim's, and
    "late" is measured from that one). :class:`~flowsched.errors.MalformedDocument` if a row
    holds no time where one must be."""
    # Keyed by (id, token): a batch may settle a lapsed claim and its re-claim together.
    applied: dict[tuple[object, object], tuple[datetime, datetime | None]] = {}
    for row in rows:
        at, ends = row[1], row[2]
        if type(at) is not datetime or at.tzinfo is not UTC:
            at = utc(at, "now")
        if ends is not None and (type(ends) is not datetime or ends.tzinfo is not UTC):
            ends = utc(ends, "lease_until", row[0])
        applied[(row[0], row[3])] = (at, ends)
    results = []
    for settlement in settlements:
        claim = settlement.claim
        found = applied.get((claim.item.id, claim.token))
        result = _new(SettleResult)
        _set_claim(result, claim)
        if found is None:
            _set_applied(result, False)
            _set_late(result, None)
        else:
            at, ends = found[0], found[1] or claim.lease_until
            _set_applied(result, True)
            _set_late(result, at - ends if at > ends else None)
        results.append(result)
    return results


def plainly_completed(settlement: Settlement) -> bool:
    return (
        isinstance(settlement.outcome, Completed)
        and not settlement.timed_out
        and settlement.traceback is None
    )


def _error_of(outcome: Outcome) -> str | None:
    if isinstance(outcome, Redeliver | NextSlot):
        return outcome.error
    if isinstance(outcome, DeadLettered):
        return outcome.dead.error
    return None


def _runs_of(outcome: Outcome) -> int | None:
    """The runs a settlement writes: a NextSlot's count (counted under the claim's fence),
    a dead letter's delivered form's; ``None``: the row's own stay."""
    if isinstance(outcome, NextSlot):
        return outcome.runs
    if isinstance(outcome, DeadLettered | Exhausted):
        return outcome.dead.item.runs
    return None


def settle_columns(settlements: Sequence[Settlement]) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {
        name: []
        for name in (
            "actions",
            "dues",
            "attempts",
            "errors",
            "applied",
            "outcomes",
            "error_types",
            "messages",
            "tracebacks",
            "dead_at",
            "runs",
        )
    }
    for settlement in settlements:
        outcome = settlement.outcome
        action, due, attempt, error, applied, dead_at = _action(settlement.claim, outcome)
        reported = _error_of(outcome)
        error_type = message = None
        if reported is not None:
            error_type, _, message = reported.partition(": ")
        ended = "failed" if reported is not None else "succeeded"
        if settlement.timed_out:
            ended = "timed_out"
        for name, value in (
            ("actions", action),
            ("dues", due),
            ("attempts", attempt),
            ("errors", error),
            ("applied", applied),
            ("outcomes", ended),
            ("error_types", error_type),
            ("messages", message),
            ("tracebacks", settlement.traceback),
            ("dead_at", dead_at),
            ("runs", _runs_of(outcome)),
        ):
            columns[name].append(value)
    return columns


def _action(
    claim: Claim, outcome: Outcome
) -> tuple[str, datetime | None, int, str | None, datetime | None, datetime | None]:
    """``(action, due, attempts, error, applied, dead_at)`` of one outcome for the settle
    statement's columns."""
    if isinstance(outcome, Completed):
        return "complete", None, claim.attempt, None, None, None
    if isinstance(outcome, Redeliver):
        return "redeliver", outcome.due, outcome.attempt, outcome.error, None, None
    if isinstance(outcome, NextSlot):
        return "next", outcome.due, 0, outcome.error, outcome.applied, None
    if isinstance(outcome, DeadLettered | Exhausted):
        dead = outcome.dead
        # The dead letter keeps the form that was delivered (a tick's slot, not the row's
        # redelivery time), as every store does.
        item = dead.item
        return "dead", item.due, dead.attempts, dead.error, item.previous, dead.dead_at
    raise TypeError(f"settle: unknown outcome {outcome!r}")
