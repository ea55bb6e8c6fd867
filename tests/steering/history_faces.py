"""The four scheduler classes behind one synchronous face, for the history and handler-limit
tests: ``InMemoryScheduler``, ``AsyncInMemoryScheduler``, ``MongoScheduler`` and
``AsyncMongoScheduler`` (both on mongomock), each on a ManualClock. An async scheduler runs
on a :class:`~flowsched.testing._async_trial.Portal`'s loop behind a ``BlockingPort``; its
clock's ``advance`` runs ``advance_async`` there."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from flowsched.clock import ManualClock
from flowsched.port import SchedulerPort
from flowsched.testing._async_trial import BlockingPort, LoopClock, Portal, built

# Now (whole seconds), not a fixed date: mongomock applies TTL indexes by the wall clock, so
# history written at a virtual time more than its retention ago would be gone at once.
CLOCK_START = datetime.now(UTC).replace(microsecond=0)

FACES = ["memory", "async-memory", "mongomock", "async-mongomock"]


@dataclass
class Face:
    """Builds schedulers of one class on one store and one clock (``node(name)``)."""

    name: str
    clock: ManualClock
    make: Callable[..., SchedulerPort]
    built: list[SchedulerPort] = field(default_factory=list)

    def node(self, node_id: str = "alpha", **options: Any) -> SchedulerPort:
        scheduler = self.make(node_id, **options)
        self.built.append(scheduler)
        scheduler.start()
        return scheduler

    @property
    def mongo(self) -> bool:
        return "mongo" in self.name


def _collection() -> Any:
    mongomock = pytest.importorskip("mongomock")
    return mongomock.MongoClient(tz_aware=True)["flowsched"][f"t_{uuid.uuid4().hex[:8]}"]


@pytest.fixture(name="face", params=FACES)
def face_fixture(request: pytest.FixtureRequest) -> Iterator[Face]:
    name = str(request.param)
    portal: Portal | None = None
    if name == "memory":
        from flowsched import InMemoryScheduler

        clock = ManualClock(CLOCK_START)
        result = Face(name, clock, lambda node, **o: InMemoryScheduler(clock=clock, **o))
    elif name == "mongomock":
        from flowsched.mongo import MongoScheduler

        clock = ManualClock(CLOCK_START)
        collection = _collection()
        result = Face(
            name,
            clock,
            lambda node, **o: MongoScheduler(collection, node_id=node, clock=clock, **o),
        )
    else:
        portal = Portal()
        loop_clock = LoopClock(portal, CLOCK_START)
        if name == "async-memory":
            from flowsched import AsyncInMemoryScheduler

            def factory(node: str, **o: Any) -> Any:
                return AsyncInMemoryScheduler(clock=loop_clock, **o)
        else:
            from flowsched import AsyncMongoScheduler

            collection = _collection()

            def factory(node: str, **o: Any) -> Any:
                return AsyncMongoScheduler(collection, node_id=node, clock=loop_clock, **o)

        def make(node: str, **o: Any) -> SchedulerPort:
            assert portal is not None
            return BlockingPort(portal, portal.call(built(lambda: factory(node, **o))))

        result = Face(name, loop_clock, make)
    yield result
    for scheduler in result.built:
        scheduler.close()
    if portal is not None:
        portal.close()
