"""A poll asks the next due time first and claims only if something is due: a quiet node
sends one call per poll, not a claim that finds nothing and then the next-due read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowsched.node.actions import ClaimDue, FindNextDue, Sleep
from flowsched.node.core import NodeCore, NodeSettings

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLL = timedelta(seconds=1)


def quiet() -> NodeCore:
    """A node past its first claim (nothing) and next-due read (nothing): waiting a poll."""
    node = NodeCore(NodeSettings("n1", poll_interval=POLL), lambda: frozenset({"h:work"}))
    node.succeeded(node.next_action(NOW), [], NOW)
    node.succeeded(node.next_action(NOW), None, NOW)
    return node


def test_a_quiet_poll_is_one_next_due_read() -> None:
    node = quiet()
    at = NOW + POLL
    ask = node.next_action(at)
    assert isinstance(ask, FindNextDue), ask
    node.succeeded(ask, None, at)
    wait = node.next_action(at)
    assert isinstance(wait, Sleep) and wait.until == at + POLL, wait


def test_a_poll_that_finds_something_due_claims_it() -> None:
    node = quiet()
    at = NOW + POLL
    ask = node.next_action(at)
    node.succeeded(ask, at - timedelta(milliseconds=5), at)  # stored by another node
    assert isinstance(node.next_action(at), ClaimDue)


def test_a_poll_that_learns_a_due_time_claims_then() -> None:
    node = quiet()
    at = NOW + POLL
    due = at + timedelta(milliseconds=300)
    node.succeeded(node.next_action(at), due, at)
    assert isinstance(node.next_action(due - timedelta(milliseconds=1)), Sleep)
    assert isinstance(node.next_action(due), ClaimDue), "a known due time is claimed at once"


def test_a_wake_claims_at_once_without_asking() -> None:
    node = quiet()
    node.wake()
    assert isinstance(node.next_action(NOW), ClaimDue)
    node = quiet()
    node.wake_at(NOW + timedelta(milliseconds=200))
    assert isinstance(node.next_action(NOW + timedelta(milliseconds=200)), ClaimDue)
