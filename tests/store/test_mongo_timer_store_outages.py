"""MongoTimerStore says what a driver outage means: nothing applied, or unknown."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from flowsched import ManualClock, OutcomeUnknown, ScheduleItem, ScheduleKind, SchedulerUnavailable

mongomock = pytest.importorskip("mongomock")
errors = pytest.importorskip("pymongo.errors")

from flowsched.mongo import MongoTimerStore  # noqa: E402


class Flaky:
    """A mongomock collection whose next ``method`` call raises ``error``."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.fail: dict[str, Exception] = {}

    def __getattr__(self, name: str) -> Any:
        error = self.fail.pop(name, None)
        if error is not None:

            def raising(*args: Any, **kwargs: Any) -> Any:
                raise error

            return raising
        return getattr(self._collection, name)


def _store() -> tuple[MongoTimerStore, Flaky, ManualClock]:
    clock = ManualClock()
    flaky = Flaky(mongomock.MongoClient(tz_aware=True).db[f"t_{uuid.uuid4().hex[:8]}"])
    return MongoTimerStore(flaky, clock=clock), flaky, clock  # type: ignore[arg-type]


def test_a_write_whose_reply_was_lost_is_an_unknown_outcome() -> None:
    store, flaky, clock = _store()
    flaky.fail["replace_one"] = errors.AutoReconnect("connection reset")
    with pytest.raises(OutcomeUnknown, match="may or may not have taken effect"):
        store.put(ScheduleItem("a", ScheduleKind.TIMER, clock.now()))


def test_no_server_selected_means_nothing_applied() -> None:
    store, flaky, _ = _store()
    flaky.fail["find_one_and_delete"] = errors.ServerSelectionTimeoutError("no primary")
    with pytest.raises(SchedulerUnavailable, match="nothing was applied") as raised:
        store.remove("a")
    assert not isinstance(raised.value, OutcomeUnknown)


def test_a_refused_request_goes_through_as_it_is() -> None:
    store, flaky, clock = _store()
    flaky.fail["replace_one"] = errors.WriteError("document too large", code=10334)
    with pytest.raises(errors.WriteError):
        store.put(ScheduleItem("a", ScheduleKind.TIMER, clock.now()))
