"""The port's contract (``flowsched.testing.check_scheduler_port``) holds on every adapter,
and fails, naming the guarantee, on adapters broken on purpose."""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime
from typing import Any

import pytest

from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind
from flowsched.delivery import RedeliveryPolicy
from flowsched.port import Handler
from flowsched.testing import check_scheduler_port, port_guarantees


def test_the_in_memory_adapter_keeps_the_contract() -> None:
    check_scheduler_port(
        lambda clock: InMemoryScheduler(clock=clock),
        redelivery_factory=lambda clock, policy: InMemoryScheduler(clock=clock, redelivery=policy),
    )


def _mongo_factories(db: Any) -> dict[str, Any]:
    from flowsched.mongo import MongoScheduler

    def build(clock: ManualClock, redelivery: RedeliveryPolicy | None = None) -> MongoScheduler:
        collection = db[f"timers_{uuid.uuid4().hex[:8]}"]  # empty storage for every scheduler
        return MongoScheduler(collection, node_id="contract", clock=clock, redelivery=redelivery)

    return {"factory": build, "redelivery_factory": build}


def test_the_mongo_adapter_keeps_the_contract_on_mongomock() -> None:
    mongomock = pytest.importorskip("mongomock")
    check_scheduler_port(**_mongo_factories(mongomock.MongoClient()["contract"]))


@pytest.mark.wire
def test_the_mongo_adapter_keeps_the_contract_on_the_wire_server(mongo_db: Any) -> None:
    check_scheduler_port(**_mongo_factories(mongo_db))


# -- adapters broken on purpose ----------------------------------------------------------


class CancelDoesNothing(InMemoryScheduler):
    def cancel(self, item_id: str) -> bool:
        return self.exists(item_id)


class FiresAtTheEndOfTheWindow(InMemoryScheduler):
    """Delivers what is due once the clock rests at its target (as before virtual time)."""

    def next_due(self, until: datetime, after: datetime | None = None) -> datetime | None:
        return None

    def start(self) -> None:
        super().start()
        clock = self._clock
        assert isinstance(clock, ManualClock)
        clock.add_listener(lambda now: self.run_due())


class SwallowsFailures(InMemoryScheduler):
    def subscribe(self, kind: ScheduleKind, handler: Handler) -> None:
        def never_fails(item: ScheduleItem, attempt: int) -> None:
            with contextlib.suppress(Exception):
                handler(item, attempt)

        super().subscribe(kind, never_fails)


class IgnoresRegister(InMemoryScheduler):
    def register(self, name: str, handler: Handler, *, on_failed: Any = None) -> None:
        return None


class ForgetsDeadLetters(InMemoryScheduler):
    def dead_letters(self) -> list[Any]:
        return []


@pytest.mark.parametrize(
    ("broken", "guarantee"),
    [
        (CancelDoesNothing, "a cancelled item is never delivered"),
        (
            FiresAtTheEndOfTheWindow,
            "inside advance(), each handler sees clock.now() equal to its item's due time",
        ),
        (SwallowsFailures, "a failing handler is redelivered after 3, 6, 12, 24, then 30 s"),
        (ForgetsDeadLetters, "an item that failed max_attempts times becomes a listed dead letter"),
        (
            IgnoresRegister,
            "an item addressed to a named handler reaches that handler, not the kind's",
        ),
    ],
    ids=["cancel", "end-of-window", "failures", "dead-letters", "register"],
)
def test_a_broken_adapter_fails_naming_the_guarantee(
    broken: type[InMemoryScheduler], guarantee: str
) -> None:
    assert guarantee in port_guarantees()
    with pytest.raises(AssertionError) as raised:
        check_scheduler_port(
            lambda clock: broken(clock=clock),
            redelivery_factory=lambda clock, policy: broken(clock=clock, redelivery=policy),
        )
    message = str(raised.value)
    assert message.startswith(f"port guarantee not held: {guarantee}"), message


def test_guarantees_needing_a_redelivery_policy_are_skipped_without_a_way_to_set_one() -> None:
    check_scheduler_port(lambda clock: ForgetsDeadLetters(clock=clock))


def test_an_adapter_that_raises_is_reported_under_the_guarantee() -> None:
    class NoGet(InMemoryScheduler):
        def get(self, item_id: str) -> ScheduleItem | None:
            raise NotImplementedError("get")

    with pytest.raises(
        AssertionError, match=r"^port guarantee not held: .*raised NotImplementedError"
    ):
        check_scheduler_port(lambda clock: NoGet(clock=clock))
