"""Fewer statements per timer for a node that starts on claim: a claim whose answer looked
ahead (:class:`~flowsched.store.ClaimsAhead`) saves the node its next-due call (it sleeps
until the time it was told, as if it had asked), and outcomes gather to a batch (or for the
gather window) before they are settled - at once when the node is driven inline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched import ScheduleItem, ScheduleKind
from flowsched.node.actions import ClaimDue, FindNextDue, SettleBatch, Sleep, StartHandler
from flowsched.node.core import NodeCore, NodeSettings
from flowsched.node.gather import GATHER
from flowsched.outcomes import Completed
from flowsched.store import Claim, ClaimsAhead

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTES = frozenset({"h:work"})
POLL = timedelta(seconds=1)


def _core() -> NodeCore:
    settings = NodeSettings("n1", workers=4, batch_size=4, poll_interval=POLL, start_on_claim=True)
    return NodeCore(settings, lambda: ROUTES)


def _after_a_short_claim(answer: list[object]) -> list[object]:
    """The actions the core takes after its claim came back with ``answer`` (no claims)."""
    core = _core()
    claim = core.next_action(START)
    assert isinstance(claim, ClaimDue)
    core.succeeded(claim, answer, START)
    actions: list[object] = []
    for _ in range(5):
        action = core.next_action(START)
        actions.append(action)
        if isinstance(action, Sleep):
            return actions
        assert not isinstance(action, StartHandler)
        core.succeeded(action, None, START)  # next_due: nothing stored
    raise AssertionError("the core never sleeps")


@pytest.mark.parametrize(
    ("ahead", "wakes_at"),
    [
        (START + timedelta(milliseconds=300), START + timedelta(milliseconds=300)),
        (START + timedelta(seconds=9), START + POLL),  # never later than a poll
        (None, START + POLL),  # nothing stored: the next poll
    ],
)
def test_a_claim_that_looked_ahead_needs_no_next_due(
    ahead: datetime | None, wakes_at: datetime
) -> None:
    actions = _after_a_short_claim(ClaimsAhead([], ahead))
    assert actions == [Sleep(wakes_at, True)], actions


def test_a_short_claim_that_did_not_look_ahead_asks_for_the_next_due() -> None:
    actions = _after_a_short_claim([])
    assert isinstance(actions[0], FindNextDue), actions
    assert actions[-1] == Sleep(START + POLL, True)


def _ran(core: NodeCore, claims: int) -> None:
    """``claims`` claims came back (short: nothing more due within the poll) and their
    handlers ran and ended."""
    claim = core.next_action(START)
    assert isinstance(claim, ClaimDue)
    core.succeeded(claim, ClaimsAhead([_claim(n) for n in range(claims)], None), START)
    for _ in range(claims):
        action = core.next_action(START)
        assert isinstance(action, StartHandler)
        core.finished(action.ticket, Completed())


def test_outcomes_short_of_a_batch_wait_for_the_gather_window() -> None:
    core = _core()
    _ran(core, 2)
    wait = core.next_action(START)
    assert isinstance(wait, Sleep) and wait.until == START + GATHER, wait
    settle = core.next_action(START + GATHER)
    assert isinstance(settle, SettleBatch) and len(settle.settlements) == 2


def test_a_batch_of_outcomes_is_settled_at_once() -> None:
    core = _core()
    _ran(core, 4)
    settle = core.next_action(START)
    assert isinstance(settle, SettleBatch) and len(settle.settlements) == 4


def test_a_node_driven_inline_settles_at_once() -> None:
    core = _core()
    core.inline += 1
    _ran(core, 2)
    settle = core.next_action(START)
    assert isinstance(settle, SettleBatch) and len(settle.settlements) == 2


def _claim(n: int) -> Claim:
    item = ScheduleItem(f"t{n}", ScheduleKind.TIMER, START, handler="work")
    return Claim(item, 0, "n1", START + timedelta(seconds=30), f"token-{n}")
