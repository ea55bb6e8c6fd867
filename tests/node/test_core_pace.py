"""A node that starts on claim paces its claims while timers fall due in a stream: after a
claim that came back short but not empty, following one that was not empty either, the next
claim goes ``pace`` after it, with no next-due call between (each claim carries a few
milliseconds' worth of timers, about two statements per ``pace``); otherwise (an empty
claim, a timer now and then) it asks for the next due time as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowsched import ScheduleItem, ScheduleKind
from flowsched.node.actions import ClaimDue, FindNextDue, Sleep, StartHandler
from flowsched.node.common import NodeOptions
from flowsched.node.core import NodeCore, NodeSettings
from flowsched.node.gather import PACE
from flowsched.outcomes import Completed
from flowsched.store import Claim

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTES = frozenset({"h:work"})
POLL = timedelta(seconds=1)
MS = timedelta(milliseconds=1)


def _core(pace: timedelta = PACE, before: int = 2) -> NodeCore:
    """A core whose last claim found ``before`` claims."""
    settings = NodeSettings(
        "n1", workers=8, batch_size=8, poll_interval=POLL, start_on_claim=True, pace=pace
    )
    core = NodeCore(settings, lambda: ROUTES)
    core.claimed_last = before
    return core


def _claim(n: int) -> Claim:
    item = ScheduleItem(f"t{n}", ScheduleKind.TIMER, START, handler="work")
    return Claim(item, 0, "n1", START + timedelta(seconds=30), f"token-{n}")


def _answer(core: NodeCore, claims: int, at: datetime) -> None:
    """The claim sent at START answers ``claims`` claims at ``at``; their handlers end."""
    claim = core.next_action(START)
    assert isinstance(claim, ClaimDue)
    core.succeeded(claim, [_claim(n) for n in range(claims)], at)
    for _ in range(claims):
        action = core.next_action(at)
        assert isinstance(action, StartHandler)
        core.finished(action.ticket, Completed())


def test_a_short_claim_in_a_stream_is_followed_by_a_claim_pace_after_it() -> None:
    core = _core()
    _answer(core, 3, START + MS)
    actions = []
    for _ in range(3):  # the settle of the three, then the wait
        action = core.next_action(START + MS)
        actions.append(action)
        if isinstance(action, Sleep):
            break
        core.succeeded(action, [], START + MS)
    assert not any(isinstance(a, FindNextDue) for a in actions), actions
    assert actions[-1] == Sleep(START + PACE, True), actions
    assert isinstance(core.next_action(START + PACE), ClaimDue)


def test_an_empty_claim_asks_for_the_next_due_time() -> None:
    core = _core()
    _answer(core, 0, START + MS)
    assert isinstance(core.next_action(START + MS), FindNextDue)


def test_a_timer_now_and_then_asks_for_the_next_due_time() -> None:
    """The claim before found nothing: one timer, not a stream (its node sleeps until the
    next one is due, as before: a wake-up is not made later by the pace)."""
    core = _core(before=0)
    _answer(core, 1, START + MS)
    actions = [core.next_action(START + MS) for _ in range(2)]
    assert any(isinstance(a, FindNextDue) for a in actions), actions


def test_without_a_pace_a_short_claim_asks_for_the_next_due_time() -> None:
    core = _core(timedelta(0))
    _answer(core, 3, START + MS)
    actions = [core.next_action(START + MS) for _ in range(2)]
    assert any(isinstance(a, FindNextDue) for a in actions), actions


def test_a_wake_during_the_pace_claims_at_once() -> None:
    core = _core()
    _answer(core, 3, START + MS)
    core.wake()  # a schedule: something may be due now
    actions = [core.next_action(START + MS) for _ in range(2)]
    assert any(isinstance(a, ClaimDue) for a in actions), actions


def test_only_a_real_time_node_that_starts_on_claim_paces() -> None:
    class Starts:
        def claim_started(self) -> None: ...

    options = NodeOptions()
    assert options.settings(False, Starts()).pace == PACE
    assert options.settings(True, Starts()).pace == timedelta(0)  # stepped by hand
    assert options.settings(False, object()).pace == timedelta(0)  # claims queue: confirmed
