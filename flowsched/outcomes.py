"""Internal: what a delivery comes to - the outcomes an adapter applies under its own fence.

:class:`~flowsched.delivery.DeliveryCore` returns one :data:`Outcome` per delivery; the adapter
applies it only if the item is still the current form of its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from flowsched.records import DeadLetter

__all__ = [
    "MAX_ERROR_CHARS",
    "Completed",
    "DeadLettered",
    "Exhausted",
    "Failure",
    "NextSlot",
    "Outcome",
    "Redeliver",
    "storable_error",
]


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failed run's outcome keeps for its attempt record (:mod:`flowsched.history`):
    whether it failed or ran past its time limit, the error's type, message and a traceback
    excerpt (``None``: no traceback)."""

    outcome: Literal["failed", "timed_out"]
    error_type: str
    error_message: str
    traceback: str | None = None


@dataclass(frozen=True, slots=True)
class Completed:
    """The handler returned: remove the item (if it is still the delivered generation)."""


@dataclass(frozen=True, slots=True)
class Redeliver:
    """The handler raised: deliver again at ``due`` with ``attempt`` earlier failures."""

    due: datetime
    attempt: int
    error: str
    failure: Failure | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class DeadLettered:
    """The handler raised for the last allowed time: set the item aside."""

    dead: DeadLetter
    failure: Failure | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class NextSlot:
    """A recurring item's tick is over - it ran, it failed and counts (``error``), or no slot
    was due: keep the item (same generation, failures reset) with ``applied`` as its last
    applied slot, due again at ``due``, with ``runs`` runs so far (``None``: unchanged)."""

    applied: datetime | None
    due: datetime
    error: str | None = None
    runs: int | None = None
    failure: Failure | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Exhausted:
    """A recurring item whose recurrence has no slot left before the year 10000 (an error,
    unlike a recurrence that ended by its ``until`` or ``max_runs``, which is
    :class:`Completed`): set it aside, never redeliver it - MongoDB moves it to quarantine,
    the in-memory adapter to its dead letters (``dead``; ``dead.error`` says why). See
    :meth:`DeliveryCore.tick`."""

    dead: DeadLetter


Outcome = Completed | Redeliver | DeadLettered | NextSlot | Exhausted

_COMPLETED = Completed()


MAX_ERROR_CHARS = 2000
"""The most of a failure's text an outcome keeps (and a store writes as ``last_error``)."""


def storable_error(text: str) -> str:
    """``text`` as every store can keep it: valid UTF-8 (a lone surrogate, as in the message
    of an ``OSError`` on an undecodable file name, escaped) and at most
    :data:`MAX_ERROR_CHARS` characters. A text a store refused would lose the outcome, and
    the item would be delivered again and again without its failures being counted."""
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "\u2026"
    return text
