"""Writes whose outcome is unknown say so, and never apply late (CONTRACT section 15).

A stand-in collection (mongomock inside) loses replies, holds requests or refuses before
sending; its database answers ``hello`` with the host's wall clock (no skew), so the store
measures the database's time and the node's writes are stamped and fenced by it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo.errors import NetworkTimeout, ServerSelectionTimeoutError

from flowsched import OutcomeUnknown, SchedulerUnavailable
from flowsched.clock import SystemClock
from flowsched.mongo import MongoScheduler
from flowsched.port import ScheduleItem, ScheduleKind

QUICK = timedelta(milliseconds=300)
TIMER = ScheduleKind.TIMER


class Wire:
    """A collection stand-in. ``lose[method]``: apply the call, then lose its reply (always,
    or ``times``); ``hold[method]``: keep the request for :meth:`deliver_held` and time out;
    ``refuse[method]``: fail before anything is sent."""

    _PLAIN = frozenset({"name", "full_name"})

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.lose: dict[str, int] = {}
        self.hold: set[str] = set()
        self.refuse: set[str] = set()
        self.held: list[Callable[[], Any]] = []

    @property
    def database(self) -> Any:
        return _Database(self._inner.database)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in self._PLAIN or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if name in self.refuse:
                raise ServerSelectionTimeoutError("no server")
            if name in self.hold:
                self.held.append(lambda: attribute(*args, **kwargs))
                raise NetworkTimeout("timed out")
            result = attribute(*args, **kwargs)
            if self.lose.get(name, 0) > 0:
                self.lose[name] -= 1
                raise NetworkTimeout("timed out")
            return result

        return call

    def deliver_held(self) -> None:
        held, self.held = self.held, []
        for request in held:
            # refused (a duplicate key, say): its reply goes to nobody
            with contextlib.suppress(Exception):
                request()


class _Database:
    """The mongomock database, with a ``hello`` that answers the host's wall clock (mongomock
    has none): the store's measured clock then has samples."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __getitem__(self, name: str) -> Any:
        return self._inner[name]

    def command(self, name: Any, *args: Any, **kwargs: Any) -> Any:
        if name == "hello":
            return {"ok": 1, "localTime": datetime.now(UTC).replace(tzinfo=None)}
        return self._inner.command(name, *args, **kwargs)


@pytest.fixture
def wire(collection: Any) -> Wire:
    return Wire(collection)


@pytest.fixture
def node(make: Any, wire: Wire) -> Callable[..., MongoScheduler]:
    def build(node_id: str) -> MongoScheduler:
        scheduler = make(collection=wire, clock=SystemClock(), op_timeout=QUICK, node_id=node_id)
        scheduler.now()  # measured: stamps and fences by the database's time
        assert scheduler.store.clock is None and scheduler.store.time.filter.samples
        return scheduler

    return build


def item(payload: dict[str, Any] | None = None) -> ScheduleItem:
    return ScheduleItem("t", TIMER, SystemClock().now() + timedelta(hours=1), payload=payload)


def test_a_schedule_stored_but_never_answered_raises_outcome_unknown(node: Any, wire: Wire) -> None:
    a = node("a")
    wire.lose["replace_one"] = 10**6
    with pytest.raises(OutcomeUnknown, match="may or may not have taken effect"):
        a.schedule(item())
    wire.lose.clear()
    assert a.exists("t")  # it had been stored


def test_a_call_that_sent_nothing_raises_scheduler_unavailable_alone(node: Any, wire: Wire) -> None:
    a = node("a")
    wire.refuse.update({"replace_one", "find_one_and_delete"})
    for call in (lambda: a.schedule(item()), lambda: a.cancel("t")):
        with pytest.raises(SchedulerUnavailable, match="did not take effect") as raised:
            call()
        assert not isinstance(raised.value, OutcomeUnknown)


def test_a_cancel_whose_first_reply_was_lost_answers_true(node: Any, wire: Wire) -> None:
    a = node("a")
    a.schedule(item())
    wire.lose["find_one_and_delete"] = 1  # applied, its reply lost; the retry finds it gone
    assert a.cancel("t") is True
    assert not a.exists("t")
    assert a.cancel("t") is False  # and a cancel of nothing is still False


def test_a_late_cancel_never_removes_the_newer_form(node: Any, wire: Wire) -> None:
    a, b = node("a"), node("b")
    a.schedule(item({"form": "old"}))
    wire.hold.add("find_one_and_delete")  # a partition holds the cancel past its op_timeout
    with pytest.raises(OutcomeUnknown):
        a.cancel("t")
    wire.hold.clear()
    newer = b.schedule(item({"form": "new"}))  # another instance schedules it again
    wire.deliver_held()  # the heal: the held deletes reach the server now

    assert b.get("t") == newer  # the new form stays (and fires)


def test_a_late_replace_never_overwrites_the_newer_form(node: Any, wire: Wire) -> None:
    a, b = node("a"), node("b")
    a.schedule(item({"form": "first"}))
    wire.hold.add("replace_one")
    with pytest.raises(OutcomeUnknown):
        a.schedule(item({"form": "late"}))
    wire.hold.clear()
    newer = b.schedule(item({"form": "newer"}))
    wire.deliver_held()

    assert b.get("t") == newer


@pytest.mark.wire
def test_on_the_wire_server_a_late_cancel_spares_a_form_stored_after_its_fence(
    mongo_db: Any,
) -> None:
    # The wire server measures the clock (hello answers localTime): forms are stamped, and a
    # delete fenced before a form's stamp leaves it (the fence the held cancel carries).
    a = MongoScheduler(mongo_db["timers"], node_id="a", op_timeout=timedelta(seconds=5))
    try:
        a.now()
        assert a.store.clock is None and a.store.time.filter.samples  # measured
        stored = a.schedule(item({"form": "new"}))
        document = mongo_db["timers"].find_one({"_id": "t"})
        assert document is not None and "stored_at" in document
        fence = document["stored_at"].replace(tzinfo=UTC) - timedelta(milliseconds=1)
        # What a cancel given up before the form was stored carries, reaching the server late:
        late = {"_id": "t", **a.store.steps.roles.fence(fence)}
        assert not mongo_db["timers"].delete_one(late).deleted_count
        assert a.get("t") == stored
        assert a.cancel("t")
    finally:
        a.close()
