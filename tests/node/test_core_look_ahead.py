"""After a claim that came back short: a claim whose answer looked ahead
(:class:`~flowsched.store.ClaimsAhead`) saves the node its next-due call (it sleeps until the
time it was told, as if it had asked), and a node that starts on claim paces its next claim
(``pace``), so that timers falling due in a stream are claimed a few at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowsched import ScheduleItem, ScheduleKind
from flowsched.node.actions import ClaimDue, FindNextDue, SettleBatch, Sleep, StartHandler
from flowsched.node.core import NodeCore, NodeSettings
from flowsched.outcomes import Completed
from flowsched.store import Claim, ClaimsAhead

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTES = frozenset({"h:work"})
POLL = timedelta(seconds=1)


def _core(pace: timedelta = timedelta(0)) -> NodeCore:
    settings = NodeSettings(
        "n1", workers=4, batch_size=8, poll_interval=POLL, start_on_claim=True, pace=pace
    )
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


PACE = timedelta(milliseconds=3)


def test_after_a_short_claim_the_next_one_waits_for_the_pace_even_when_woken() -> None:
    core = _core(PACE)
    claim = core.next_action(START)
    assert isinstance(claim, ClaimDue)
    at = START + timedelta(milliseconds=1)  # the answer came 1 ms after the claim went
    core.succeeded(claim, ClaimsAhead([], START), at)  # short; something due already
    core.wake()  # a schedule, say
    assert core.next_action(at) == Sleep(START + PACE, True)
    assert isinstance(core.next_action(START + PACE), ClaimDue)


def test_a_full_claim_is_not_paced() -> None:
    core = _core(PACE)
    claim = core.next_action(START)
    assert isinstance(claim, ClaimDue)
    core.succeeded(claim, ClaimsAhead([_claim(n) for n in range(claim.limit)], None), START)
    for _ in range(claim.limit):
        assert isinstance(core.next_action(START), StartHandler)
    assert isinstance(core.next_action(START), Sleep), "no room: it waits for a slot"
    for ticket in range(1, claim.limit + 1):
        core.finished(ticket, Completed())
    assert isinstance(core.next_action(START), SettleBatch)
    assert isinstance(core.next_action(START), ClaimDue), "a full claim's next one waited"


def test_a_node_on_a_manual_clock_does_not_pace() -> None:
    from flowsched.clock import ManualClock
    from flowsched.node.common import NodeOptions, is_manual

    clock = ManualClock(START)
    assert NodeOptions(clock=clock).settings(is_manual(clock), object()).pace == timedelta(0)


def _claim(n: int) -> Claim:
    item = ScheduleItem(f"t{n}", ScheduleKind.TIMER, START, handler="work")
    return Claim(item, 0, "n1", START + timedelta(seconds=30), f"token-{n}")
