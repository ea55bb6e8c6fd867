"""The node core's lanes: one store call per lane in flight, the lanes together (a driver
that answers calls out of order, as the thread and asyncio drivers may)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowsched import ManualClock, ScheduleItem, ScheduleKind
from flowsched.errors import OutcomeUnknown
from flowsched.node.actions import (
    Action,
    ClaimDue,
    ConfirmStart,
    RenewLeases,
    SettleBatch,
    Sleep,
    StartHandler,
)
from flowsched.node.core import NodeCore, NodeSettings, lane, store_call
from flowsched.node.gather import SETTLE_GATHER
from flowsched.outcomes import Completed
from flowsched.store import MemoryTimerStore

START = datetime(2026, 1, 1, tzinfo=UTC)
ROUTE = "h:work"
ROUTES = frozenset({ROUTE})


def _core(**settings: object) -> NodeCore:
    return NodeCore(NodeSettings("n1", **settings), lambda: ROUTES)  # type: ignore[arg-type]


def _put(store: MemoryTimerStore, count: int) -> None:
    for n in range(count):
        store.put(ScheduleItem(f"t{n}", ScheduleKind.TIMER, START, handler="work"))


def _sent(core: NodeCore, now: datetime) -> list[Action]:
    """The actions the core asks for until it sleeps, none answered (handlers started)."""
    sent: list[Action] = []
    for _ in range(50):
        action = core.next_action(now)
        if isinstance(action, Sleep):
            return sent
        if not isinstance(action, StartHandler):
            sent.append(action)
    raise AssertionError(f"the core never sleeps: {sent[-5:]}")


def test_one_call_per_lane_in_flight_and_the_lanes_together() -> None:
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    _put(store, 30)
    core = _core(workers=4, batch_size=8)
    first = _sent(core, clock.now())
    assert [type(a) for a in first] == [ClaimDue], first
    claims = store_call(first[0], store, core.settings, ROUTES)
    core.succeeded(first[0], claims, clock.now())
    second = _sent(core, clock.now())
    lanes = [lane(a) for a in second]
    assert len(lanes) == len(set(lanes)), f"two calls of one lane in flight: {second}"
    assert {type(a) for a in second} == {ConfirmStart, ClaimDue}, (
        f"the next claim is not on its way while the first claims are confirmed: {second}"
    )


def test_a_confirm_answered_after_the_next_claim_starts_only_what_it_confirmed() -> None:
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    _put(store, 30)
    core = _core(workers=4, batch_size=8)
    (claim,) = _sent(core, clock.now())
    core.succeeded(claim, store_call(claim, store, core.settings, ROUTES), clock.now())
    calls = _sent(core, clock.now())
    confirm = next(a for a in calls if isinstance(a, ConfirmStart))
    nxt = next(a for a in calls if isinstance(a, ClaimDue))
    confirmed = store_call(confirm, store, core.settings, ROUTES)
    more = store_call(nxt, store, core.settings, ROUTES)
    core.succeeded(nxt, more, clock.now())  # the claim answers first
    core.succeeded(confirm, confirmed, clock.now())
    started = []
    for _ in range(20):
        action = core.next_action(clock.now())
        if not isinstance(action, StartHandler):
            break
        started.append(action.claim.item.id)
    assert started == [c.item.id for c in confirm.claims], started
    assert not any(c.item.id in started for c in more)


def test_no_confirm_goes_out_while_a_renewal_is_due() -> None:
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    _put(store, 3)
    core = _core(workers=1, batch_size=8, lease=timedelta(seconds=10))
    (claim,) = _sent(core, clock.now())
    core.succeeded(claim, store_call(claim, store, core.settings, ROUTES), clock.now())
    (confirm,) = [a for a in _sent(core, clock.now()) if isinstance(a, ConfirmStart)]
    core.succeeded(confirm, store_call(confirm, store, core.settings, ROUTES), clock.now())
    start = core.next_action(clock.now())
    assert isinstance(start, StartHandler), start
    ticket = start.ticket
    clock.advance(timedelta(seconds=6))  # past half the lease of the queued claims
    core.finished(ticket, Completed())
    calls = _sent(core, clock.now())  # the renewal goes first, then the settle
    assert not any(isinstance(a, ConfirmStart) for a in calls), (
        f"a confirm went out with less than half its lease left: {calls}"
    )


def test_an_overdue_renewal_goes_before_a_settle_retried_and_keeps_its_claim() -> None:
    # Seed 7241 of the node simulation: a settle whose reply was lost held the main lane
    # past the renewal time; its retry went before the overdue renewal, the running
    # handler's lease lapsed, the item was claimed again and ran twice.
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    _put(store, 2)
    core = _core(workers=2, batch_size=2, lease=timedelta(seconds=10))
    (claim,) = _sent(core, clock.now())
    core.succeeded(claim, store_call(claim, store, core.settings, ROUTES), clock.now())
    (confirm,) = [a for a in _sent(core, clock.now()) if isinstance(a, ConfirmStart)]
    core.succeeded(confirm, store_call(confirm, store, core.settings, ROUTES), clock.now())
    tickets = [
        a.ticket
        for a in (core.next_action(clock.now()) for _ in range(2))
        if isinstance(a, StartHandler)
    ]
    assert len(tickets) == 2, tickets
    core.finished(tickets[0], Completed())
    gather = core.next_action(clock.now())  # t1 runs: the settle waits a little for it
    assert isinstance(gather, Sleep) and gather.until == clock.now() + SETTLE_GATHER, gather
    clock.advance(SETTLE_GATHER)
    settle = core.next_action(clock.now())
    assert isinstance(settle, SettleBatch), settle
    store_call(settle, store, core.settings, ROUTES)  # applied, but its reply is lost
    clock.advance(timedelta(seconds=6))  # past half the lease of the running claim
    core.failed(settle, OutcomeUnknown("reply lost"), clock.now())
    clock.advance(timedelta(seconds=1))  # the outage backoff is over
    renew = core.next_action(clock.now())
    assert isinstance(renew, RenewLeases), f"a settle went before an overdue renewal: {renew}"
    assert {c.item.id for c in renew.claims} == {"t0", "t1"}, renew.claims
    core.succeeded(renew, store_call(renew, store, core.settings, ROUTES), clock.now())
    clock.advance(timedelta(seconds=4))  # the first lease of t1 has ended
    core.finished(tickets[1], Completed())
    assert store.claim_due(ROUTES, "n2", timedelta(seconds=10), 5) == []
    calls = _sent(core, clock.now())
    (retry,) = [a for a in calls if isinstance(a, SettleBatch)]
    results = store_call(retry, store, core.settings, ROUTES)
    assert [r.applied for r in results if r.claim.item.id == "t1"] == [True], results
    assert store.get("t1") is None


def test_a_confirm_answered_after_its_lease_ended_starts_nothing() -> None:
    # A confirm goes out with at least half a lease left; a reply slower than that (an
    # op_timeout longer than half the lease) must not start a claim another node may hold.
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    _put(store, 2)
    core = _core(workers=1, batch_size=8, lease=timedelta(seconds=10))
    (claim,) = _sent(core, clock.now())
    core.succeeded(claim, store_call(claim, store, core.settings, ROUTES), clock.now())
    (confirm,) = [a for a in _sent(core, clock.now()) if isinstance(a, ConfirmStart)]
    confirmed = store_call(confirm, store, core.settings, ROUTES)
    assert confirmed, "the store confirmed the claim"
    clock.advance(timedelta(seconds=11))  # the reply arrives after the lease's end
    core.succeeded(confirm, confirmed, clock.now())
    assert not isinstance(core.next_action(clock.now()), StartHandler)


def _waves(
    core: NodeCore,
    store: MemoryTimerStore,
    clock: ManualClock,
    until: tuple[type, ...],
    *,
    hold_confirms: bool = False,
) -> Action:
    """Run a queueing node's waves - every handler started finishes at once, every confirm
    is answered (with ``hold_confirms``, once the core has nothing else to send) - up to
    its first action of a type in ``until``, which is returned unanswered."""
    held: ConfirmStart | None = None
    for _ in range(60):
        action = core.next_action(clock.now())
        if isinstance(action, until):
            return action
        if isinstance(action, StartHandler):
            core.finished(action.ticket, Completed())
        elif isinstance(action, ConfirmStart) and not hold_confirms:
            core.succeeded(action, store_call(action, store, core.settings, ROUTES), clock.now())
        elif isinstance(action, ConfirmStart):
            held = action
        elif isinstance(action, Sleep) and held is not None:
            core.succeeded(held, store_call(held, store, core.settings, ROUTES), clock.now())
            held = None
    raise AssertionError(f"no {until} in 60 actions")


def test_outcomes_owed_do_not_shrink_a_queueing_nodes_next_claim() -> None:
    # A queueing node (4 workers, batches of 20) runs its batch wave by wave, each wave's
    # confirm answered once the core has nothing else to send, while the outcomes gather
    # for one settle. When its queue runs low, the next claim asks for a full batch: the
    # outcomes owed are no claims to hold back for (it asked for what workers + batch_size
    # left beside them, 4 here: on MongoDB a claim's two round trips for a wave).
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    _put(store, 60)
    core = _core(workers=4, batch_size=20)
    (first,) = _sent(core, clock.now())
    core.succeeded(first, store_call(first, store, core.settings, ROUTES), clock.now())
    action = _waves(core, store, clock, (ClaimDue,), hold_confirms=True)
    assert isinstance(action, ClaimDue)
    assert len(core.queue) < 2 * 4 and len(core.pending) >= 8, (core.queue, core.pending)
    held = len(core.running) + len(core.queue) + core.confirming  # claims, not outcomes
    assert action.limit == 4 + 20 - held, (action, held, len(core.pending))


def test_a_queueing_node_claims_nothing_while_a_batch_of_outcomes_is_owed() -> None:
    # Outcomes owed no longer count against workers + batch_size (above), so this bound
    # keeps them from piling up when settles fail and claims succeed: with a batch's worth
    # owed (here a settle of 4 in flight) the node claims nothing, and is saturated (its
    # change stream left unread); once the settle is answered it claims again.
    clock = ManualClock(START)
    store = MemoryTimerStore(clock)
    _put(store, 20)
    core = _core(workers=2, batch_size=4)
    (first,) = _sent(core, clock.now())
    core.succeeded(first, store_call(first, store, core.settings, ROUTES), clock.now())
    settle = _waves(core, store, clock, (SettleBatch, ClaimDue))
    assert isinstance(settle, SettleBatch), (settle, core.pending, core.settling)
    assert len(settle.settlements) == 4
    assert isinstance(core.next_action(clock.now()), Sleep)
    assert core.saturated
    core.succeeded(settle, store_call(settle, store, core.settings, ROUTES), clock.now())
    assert not core.saturated
    assert isinstance(core.next_action(clock.now()), ClaimDue)
