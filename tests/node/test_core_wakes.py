"""A wake that comes while a claim or a next-due read is on its way is not lost: that call
may have been answered before the item was stored, so its result must not put the next look
a poll away (found on PostgreSQL: a timer scheduled while the node's first claim was out
waited for the next poll)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowsched.node.actions import ClaimDue, FindNextDue
from flowsched.node.core import NodeCore, NodeSettings

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLL = timedelta(seconds=60)


def core() -> NodeCore:
    return NodeCore(NodeSettings("n1", poll_interval=POLL), lambda: frozenset({"h:work"}))


def test_a_wake_at_during_a_claim_is_kept() -> None:
    node = core()
    claim = node.next_action(NOW)
    assert isinstance(claim, ClaimDue)
    node.wake_at(NOW)  # scheduled meanwhile, due now
    node.succeeded(claim, [], NOW)  # the claim had not seen it
    assert isinstance(node.next_action(NOW), ClaimDue)


def test_a_wake_during_a_next_due_read_is_kept() -> None:
    node = core()
    claim = node.next_action(NOW)
    node.succeeded(claim, [], NOW)
    find = node.next_action(NOW)
    assert isinstance(find, FindNextDue)
    node.wake()  # a route was added, a timer requeued...
    node.succeeded(find, None, NOW)  # read before it
    assert isinstance(node.next_action(NOW), ClaimDue)


def test_a_quiet_node_still_waits_a_poll() -> None:
    node = core()
    node.succeeded(node.next_action(NOW), [], NOW)
    node.succeeded(node.next_action(NOW), None, NOW)
    assert not isinstance(node.next_action(NOW), ClaimDue | FindNextDue)
