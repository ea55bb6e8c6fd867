"""A settle and its history in one ``bulkWrite`` (MongoDB 8.0+), and every way back to one
``bulk_write`` per collection: ``flowsched.mongo.together``, stepped by hand (no server)."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.errors import (
    AutoReconnect,
    ClientBulkWriteException,
    InvalidOperation,
    OperationFailure,
    WriteConcernError,
    WTimeoutError,
)
from pymongo.results import DeleteResult

from flowsched.mongo.commands import Call, Counts, Together, Write
from flowsched.mongo.together import Capability, Done, together_steps

TOO_OLD = "MongoClient.bulk_write requires MongoDB server version 8.0+."

ITEMS = ("items", [Write({"_id": "a", "claim.token": "t"}, many=True)])
HISTORY = ("history", [Write({"_id": "a"}, {"$push": {"attempts": 1}}, upsert=True)])


def _refused(
    error: object = None, *, write_errors: list[int] = (), concern: dict[str, Any] | None = None
) -> ClientBulkWriteException:
    """What pymongo raises: ``error`` of the whole command, or the writes at ``write_errors``
    refused (the others applied: a delete of 1 at index 0 if it is not refused)."""
    applied = error is None and 0 not in write_errors
    details: dict[str, Any] = {
        "error": error,
        "writeErrors": [{"idx": n, "code": 2, "errmsg": "bad"} for n in write_errors],
        "writeConcernErrors": [concern] if concern else [],
        "anySuccessful": applied,
        "nInserted": 0,
        "nUpserted": 0,
        "nMatched": 0,
        "nModified": 0,
        "nDeleted": 1 if applied else 0,
        "insertResults": {},
        "updateResults": {},
        "deleteResults": {0: DeleteResult({"n": 1, "idx": 0}, True)} if applied else {},
    }
    return ClientBulkWriteException(details, verbose=True)


def _first(steps: Any) -> Any:
    return next(steps)


def _answer(error: Exception, capability: Capability) -> Done | None:
    """What ``together_steps`` returns when its command raises ``error`` (anything else it
    raises, raised)."""
    steps = together_steps([ITEMS, HISTORY], capability)
    _first(steps)
    with pytest.raises(StopIteration) as done:
        steps.throw(error)
    answer: Done | None = done.value.value
    return answer


def test_both_parts_go_in_one_command_and_each_part_gets_its_counts() -> None:
    capability = Capability(True)
    steps = together_steps([ITEMS, HISTORY], capability)
    op = _first(steps)
    assert isinstance(op, Together)
    assert [role for role, _ in op.parts] == ["items", "history"]
    with pytest.raises(StopIteration) as done:
        steps.send([Counts(deleted=1), Counts(1, 0, 0)])
    assert done.value.value == Done([Counts(deleted=1), Counts(1, 0, 0)], [[], []])
    assert capability.usable


def test_a_server_before_8_0_turns_the_capability_off_for_good() -> None:
    capability = Capability(True)
    answer = _answer(InvalidOperation(TOO_OLD), capability)
    assert answer is None  # the caller writes the parts one by one
    assert not capability.usable
    with pytest.raises(StopIteration) as again:
        _first(together_steps([ITEMS, HISTORY], capability))  # never tried again
    assert again.value.value is None


def test_a_server_without_the_command_turns_the_capability_off_too() -> None:
    capability = Capability(True)
    answer = _answer(_refused(OperationFailure("no such command: 'bulkWrite'", 59)), capability)
    assert answer is None
    assert not capability.usable


def test_a_refused_write_inside_the_command_is_handed_back_and_what_applied_is_counted() -> None:
    capability = Capability(True)
    answer = _answer(_refused(write_errors=[1]), capability)  # the history's upsert refused
    # The delete applied (a cancel must still say True): counted, not sent again.
    assert answer == Done([Counts(deleted=1), Counts()], [[], HISTORY[1]], {1: 2})
    assert capability.usable  # the server can: only that write goes the old way


def test_a_write_concern_error_may_have_applied_and_is_raised_as_one_collection_raises_it() -> None:
    for concern, kind in (
        ({"code": 91, "errmsg": "shutting down"}, WriteConcernError),
        ({"code": 64, "errmsg": "waiting for replication timed out"}, WTimeoutError),
    ):
        with pytest.raises(kind) as raised:
            _answer(_refused(concern=concern), Capability(True))
        assert raised.value.code == concern["code"]


def test_an_invalid_operation_that_is_not_the_servers_age_is_raised() -> None:
    capability = Capability(True)
    with pytest.raises(InvalidOperation):
        _answer(InvalidOperation("Cannot use MongoClient after close"), capability)
    assert capability.usable


def test_a_refusal_of_the_whole_command_before_anything_applied_falls_back_for_good() -> None:
    capability = Capability(True)  # say, a role with no rights on the history collection
    answer = _answer(
        _refused(OperationFailure("not authorized on db to execute command", 13)), capability
    )
    assert answer is None
    assert not capability.usable


def test_the_commands_own_failure_is_raised_as_itself() -> None:
    capability = Capability(True)
    lost = AutoReconnect("connection closed")
    with pytest.raises(AutoReconnect) as raised:
        _answer(_refused(lost), capability)
    assert raised.value is lost  # the caller's transient-outage rule sees what happened
    assert capability.usable


def test_a_history_whose_settle_went_the_old_way_still_rides_on_it() -> None:
    from datetime import UTC, datetime

    from flowsched.mongo.commands import Counts
    from flowsched.mongo.history import MongoHistory

    class Store:
        together = Capability(True)
        bulk = True

        @staticmethod
        def write_steps(role: str, writes: Any) -> Any:
            result = yield Call(role, "bulk_write", (writes,))
            return result

    def items(writes: Any) -> Any:
        yield Call("items", "bulk_write", (writes,))
        return Counts(deleted=len(writes))

    now = datetime(2026, 12, 6, tzinfo=UTC)
    history = MongoHistory(lambda: now, "node-a")
    record = ("a", {"k": "x", "started": now, "ended": now})
    writes = [Write({"_id": "a"}, many=True)]
    steps = history.settle_steps(Store(), writes, [record], items)  # type: ignore[arg-type]
    sent = [_first(steps)]
    sent.append(steps.throw(InvalidOperation(TOO_OLD)))  # a server before 8.0
    sent.append(steps.send(None))
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    assert [type(op).__name__ for op in sent] == ["Together", "Call", "Call"]
    assert [op.role for op in sent[1:]] == ["items", "history"]
    assert done.value.value == Counts(deleted=1)  # the items' counts, for the settle


def test_a_settles_items_refused_inside_the_command_are_sent_again_and_counted() -> None:
    from datetime import UTC, datetime

    from flowsched.mongo.commands import Counts
    from flowsched.mongo.history import MongoHistory

    def items(writes: Any) -> Any:
        yield Call("items", "bulk_write", (writes,))
        return Counts(matched=len(writes))

    now = datetime(2026, 12, 6, tzinfo=UTC)
    history = MongoHistory(lambda: now, "node-a")
    record = ("a", {"k": "x", "started": now, "ended": now})
    writes = [Write({"_id": "a"}, many=True), Write({"_id": "b"}, {"$set": {"x": 1}})]
    store = type("Store", (), {"together": Capability(True)})()
    steps = history.settle_steps(store, writes, [record], items)  # type: ignore[arg-type]
    assert type(_first(steps)).__name__ == "Together"
    # The command applied the delete and the history; the update was refused in it.
    again = steps.throw(_refused(write_errors=[1]))
    assert (again.role, again.args[0]) == ("items", [writes[1]])
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    assert done.value.value == Counts(matched=1, deleted=1)


@pytest.mark.wire
def test_on_the_server_a_history_write_refused_inside_the_command_loses_no_settle(
    mongo_uri: str,
) -> None:
    # One item's stored history is not an array: its $push is refused. Every item is
    # settled, the other histories written, the bad one dropped (logged), nothing fired
    # twice, nothing applied sent twice. (The MongoDB faces now settle through the timer
    # store: the items' writes, then the history's, each collection's own batch.)
    from datetime import UTC, datetime

    from commands import monitored_database

    from flowsched.clock import ManualClock
    from flowsched.mongo import MongoScheduler
    from flowsched.port import ScheduleItem, ScheduleKind

    with monitored_database(mongo_uri, "fs_tog") as (database, commands):
        clock = ManualClock(datetime.now(UTC))
        scheduler = MongoScheduler(database["timers"], clock=clock)
        fired: list[str] = []
        scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: fired.append(item.id))
        for n in range(3):
            scheduler.schedule(ScheduleItem(f"t-{n}", ScheduleKind.TIMER, clock.now()))
        database["timers_history"].insert_one({"_id": "t-1", "attempts": "not an array"})
        commands.take()

        assert scheduler.run_due() == 3

        names = [name for name, _, _ in commands.take()]
        assert names.count("delete") <= 3, names  # each completion sent once, at most
        assert sorted(fired) == ["t-0", "t-1", "t-2"]
        assert database["timers"].count_documents({}) == 0
        assert [a.outcome for a in scheduler.history("t-0")] == ["succeeded"]
        assert [a.outcome for a in scheduler.history("t-2")] == ["succeeded"]
        assert scheduler.run_due() == 0


@pytest.mark.wire
def test_on_the_server_the_command_carries_the_collections_write_concern(mongo_uri: str) -> None:
    from datetime import UTC, datetime

    from commands import monitored_database
    from pymongo import WriteConcern

    from flowsched.clock import ManualClock
    from flowsched.mongo import MongoScheduler
    from flowsched.port import ScheduleItem, ScheduleKind

    with monitored_database(mongo_uri, "fs_tog") as (database, commands):
        concern = WriteConcern(w=1, j=True)
        collection = database.get_collection("timers", write_concern=concern)
        clock = ManualClock(datetime.now(UTC))
        scheduler = MongoScheduler(collection, clock=clock)
        scheduler.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)
        scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now()))
        commands.take()
        assert scheduler.run_due() == 1
        # The settle's writes on the items (the completed item's delete, in the bulkWrite
        # with the history's where the server has it) carry it.
        [settle] = [c for name, _, c in commands.take() if name in ("delete", "bulkWrite")]
    assert settle["writeConcern"] == {"w": 1, "j": True}


def test_a_collection_that_encodes_unlike_its_client_never_tries() -> None:
    from bson.binary import UuidRepresentation
    from bson.codec_options import CodecOptions
    from pymongo import MongoClient

    from flowsched.mongo.store import TimerStore

    client: Any = MongoClient(connect=False)  # never connects: only its options are read
    plain = TimerStore(client.db.timers)
    options = CodecOptions(uuid_representation=UuidRepresentation.STANDARD)
    odd = TimerStore(client.db.get_collection("timers", codec_options=options))
    assert plain.together.usable and not odd.together.usable
    client.close()


def test_a_refusal_of_one_batch_before_anything_applied_keeps_trying_the_next() -> None:
    capability = Capability(True)
    answer = _answer(_refused(OperationFailure("object to insert too large", 10334)), capability)
    assert answer is None  # this batch the old way, which names the bad write
    assert capability.usable


def test_in_order_the_writes_after_a_refused_one_are_handed_back_with_it() -> None:
    # A schedule's form, then the removal of its id's dead letter: the server stops at the
    # form it refuses (a running form: a duplicate key), so the letter was not tried either.
    steps = together_steps([ITEMS, HISTORY], Capability(True), ordered=True)
    op = _first(steps)
    assert isinstance(op, Together) and op.ordered
    with pytest.raises(StopIteration) as done:
        steps.throw(_refused(write_errors=[0]))
    assert done.value.value == Done([Counts(), Counts()], [ITEMS[1], HISTORY[1]], {0: 2})


def test_in_order_a_refusal_inside_a_part_hands_back_the_rest_of_it_and_the_next_part() -> None:
    first, second = Write({"_id": "a"}), Write({"_id": "b"})
    parts = [("items", [first, second]), HISTORY]
    steps = together_steps(parts, Capability(True), ordered=True)
    _first(steps)
    with pytest.raises(StopIteration) as done:
        steps.throw(_refused(write_errors=[1]))  # the first delete applied, the second refused
    assert done.value.value == Done([Counts(deleted=1), Counts()], [[second], HISTORY[1]], {1: 2})
