"""Internal: what a node core asks its driver to do — decisions as data.

The driver performs an action and feeds its result back to the core (see
:class:`~flowsched.node.core.NodeCore`); only the ``Start`` of a handler and ``Sleep`` are
not store calls. Store calls are made one at a time, by the driver's loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flowsched.store.records import Claim, Settlement

if TYPE_CHECKING:
    from flowsched.node.settings import NodeSettings

__all__ = [
    "Action",
    "ClaimDue",
    "ConfirmStart",
    "FindNextDue",
    "ReleaseClaims",
    "RenewLeases",
    "SettleBatch",
    "Sleep",
    "CLAIM",
    "CONFIRM",
    "MAIN",
    "StartHandler",
    "claims_of",
    "lane",
    "store_call",
]


@dataclass(frozen=True, slots=True)
class ClaimDue:
    """Call ``store.claim_due(routes, owner, lease, limit)``; feed :meth:`NodeCore.claimed`.
    ``start``: call ``store.claim_started`` instead, whose claims are started (their check
    made and start recorded in the same call): the node starts them at once."""

    limit: int
    start: bool = False


@dataclass(frozen=True, slots=True)
class ConfirmStart:
    """Call ``store.confirm_start(claims)``; feed :meth:`NodeCore.confirmed`. The claims
    returned are started at once (no other store call in between)."""

    claims: tuple[Claim, ...]


@dataclass(frozen=True, slots=True)
class StartHandler:
    """Run the handler of ``claim`` (confirmed just now); when it ends, feed
    :meth:`NodeCore.finished` with ``ticket`` and its outcome."""

    claim: Claim
    ticket: int


@dataclass(frozen=True, slots=True)
class SettleBatch:
    """Call ``store.settle(settlements)``; feed :meth:`NodeCore.settled`."""

    settlements: tuple[Settlement, ...]


@dataclass(frozen=True, slots=True)
class RenewLeases:
    """Call ``store.renew(claims, lease)``; feed :meth:`NodeCore.renewed`."""

    claims: tuple[Claim, ...]


@dataclass(frozen=True, slots=True)
class ReleaseClaims:
    """Call ``store.release(claims)`` (closing: claims that never started); feed
    :meth:`NodeCore.released`."""

    claims: tuple[Claim, ...]


@dataclass(frozen=True, slots=True)
class FindNextDue:
    """Call ``store.next_due(routes)``; feed :meth:`NodeCore.next_due_is`."""


@dataclass(frozen=True, slots=True)
class Sleep:
    """Nothing to do before ``until`` (``None``: until woken); wait for a wake-up, a handler
    finishing, or that time. ``idle`` is true when nothing is running or owed to the store
    (what a closing driver waits for, and where an inline ``run_due`` stops)."""

    until: datetime | None
    idle: bool


Action = (
    ClaimDue
    | ConfirmStart
    | StartHandler
    | SettleBatch
    | RenewLeases
    | ReleaseClaims
    | FindNextDue
    | Sleep
)


def store_call(action: Action, store: Any, settings: NodeSettings, routes: frozenset[str]) -> Any:
    """The store method call ``action`` stands for: its result (synchronous store) or its
    coroutine (async store). ``Sleep`` and ``StartHandler`` are not store calls."""
    if isinstance(action, ClaimDue):
        claim = store.claim_started if action.start else store.claim_due
        return claim(routes, settings.owner, settings.lease, action.limit)
    if isinstance(action, ConfirmStart):
        return store.confirm_start(action.claims)
    if isinstance(action, SettleBatch):
        return store.settle(action.settlements)
    if isinstance(action, RenewLeases):
        return store.renew(action.claims, settings.lease)
    if isinstance(action, ReleaseClaims):
        return store.release(action.claims)
    if isinstance(action, FindNextDue):
        wake = getattr(store, "next_wake", None)  # on the node's clock; None after a poll
        return store.next_due(routes) if wake is None else wake(routes, settings.poll_interval)
    raise TypeError(f"{action!r} is not a store call")


MAIN, CONFIRM, CLAIM = "main", "confirm", "claim"


def lane(action: Action) -> str:
    """The lane of a store call: calls of different lanes may be in flight together
    (claims touch unclaimed rows, confirms the queued claims, the main lane settles,
    renews and releases), calls of one lane go one at a time."""
    if isinstance(action, ClaimDue | FindNextDue):
        return CLAIM
    if isinstance(action, ConfirmStart):
        return CONFIRM
    return MAIN


def claims_of(result: object) -> list[Claim]:
    """The claims a store call answered (a ``TypeError`` if it did not answer a list)."""
    if not isinstance(result, list):
        raise TypeError(f"expected a list of Claim from the store, got {type(result).__name__}")
    return [claim for claim in result if isinstance(claim, Claim)]
