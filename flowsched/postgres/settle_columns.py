"""Internal: the settle statement's parallel arrays - one column per field of a batch of
outcomes, so that a batch of any size is one statement (see ``settle`` in ``queries.sql``).

Each :class:`~flowsched.store.Settlement` becomes one row of the arrays: its claim's fence
(its identity: id, generation, owner, token), the action (``complete``, ``redeliver``, ``next``,
``dead``) with its values (a ``next``'s runs among them), and how its history attempt ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from flowsched.outcomes import Completed, DeadLettered, Exhausted, NextSlot, Outcome, Redeliver
from flowsched.store.records import Claim, Settlement

__all__ = ["fences", "plainly_completed", "settle_columns"]


def fences(claims: Sequence[Claim]) -> dict[str, list[Any]]:
    return {
        "ids": [claim.item.id for claim in claims],
        "generations": [claim.generation for claim in claims],
        "owners": [claim.owner for claim in claims],
        "tokens": [claim.token for claim in claims],
    }


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
