"""A wake-up heard while a claim or next-due call is on its way is not lost: the call's answer
may predate the timer that caused it (its snapshot was taken before the schedule committed),
and without the wake the node would wait for its next poll."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowsched import ManualClock, ScheduleItem, ScheduleKind
from flowsched.node.actions import Action, ClaimDue, FindNextDue, Sleep, StartHandler
from flowsched.node.core import NodeCore, NodeSettings, store_call
from flowsched.store import MemoryTimerStore

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTES = frozenset({"h:work"})
POLL = timedelta(seconds=1)


def _core() -> NodeCore:
    return NodeCore(NodeSettings("n1", workers=4, batch_size=8, poll_interval=POLL), lambda: ROUTES)


def _item(name: str, due: datetime) -> ScheduleItem:
    return ScheduleItem(name, ScheduleKind.TIMER, due, handler="work")


def _answer_now(core: NodeCore, store: MemoryTimerStore, action: Action) -> None:
    core.succeeded(action, store_call(action, store, core.settings, ROUTES), START)


def _claims_until_sleep(core: NodeCore, store: MemoryTimerStore) -> tuple[list[str], Sleep]:
    """Answer the core's store calls at START until it sleeps: the ids it claimed."""
    claimed: list[str] = []
    for _ in range(20):
        action = core.next_action(START)
        if isinstance(action, Sleep):
            return claimed, action
        if isinstance(action, StartHandler):
            continue
        result = store_call(action, store, core.settings, ROUTES)
        if isinstance(action, ClaimDue):
            claimed += [claim.item.id for claim in result]
        core.succeeded(action, result, START)
    raise AssertionError("the core never sleeps")


def test_a_wake_heard_while_a_claim_is_on_its_way_claims_again_at_once() -> None:
    store = MemoryTimerStore(ManualClock(START))
    core = _core()
    claim = core.next_action(START)
    assert isinstance(claim, ClaimDue)
    empty = store_call(claim, store, core.settings, ROUTES)  # its snapshot: nothing due
    store.put(_item("late-comer", START))  # committed meanwhile; its NOTIFY wakes the node
    core.wake()
    core.succeeded(claim, empty, START)
    claimed, _ = _claims_until_sleep(core, store)
    assert claimed == ["late-comer"], "the wake was lost: the timer waits for the next poll"


def test_a_wake_heard_while_next_due_is_on_its_way_claims_again_at_once() -> None:
    store = MemoryTimerStore(ManualClock(START))
    core = _core()
    _answer_now(core, store, core.next_action(START))  # an empty claim: next due asked
    ask = core.next_action(START)
    assert isinstance(ask, FindNextDue)
    nothing = store_call(ask, store, core.settings, ROUTES)
    store.put(_item("late-comer", START))
    core.wake()
    core.succeeded(ask, nothing, START)
    claimed, _ = _claims_until_sleep(core, store)
    assert claimed == ["late-comer"], "the wake was lost: the timer waits for the next poll"


def test_a_wake_at_heard_while_next_due_is_on_its_way_is_kept() -> None:
    store = MemoryTimerStore(ManualClock(START))
    core = _core()
    _answer_now(core, store, core.next_action(START))
    ask = core.next_action(START)
    assert isinstance(ask, FindNextDue)
    nothing = store_call(ask, store, core.settings, ROUTES)
    soon = START + timedelta(milliseconds=300)
    store.put(_item("soon", soon))
    core.wake_at(soon)
    core.succeeded(ask, nothing, START)
    claimed, sleep = _claims_until_sleep(core, store)
    assert claimed == [] and sleep.until == soon, f"sleeps until {sleep.until}, not {soon}"


def test_a_wake_before_the_call_went_out_costs_no_extra_claim() -> None:
    store = MemoryTimerStore(ManualClock(START))
    core = _core()
    core.wake()  # heard before the claim was sent: its answer sees everything
    claim = core.next_action(START)
    assert isinstance(claim, ClaimDue)
    _answer_now(core, store, claim)
    follow = core.next_action(START)
    assert isinstance(follow, FindNextDue), follow
