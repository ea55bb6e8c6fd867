"""Internal: the simulated world's time and database — the reference clock, each node's
skewed clock, and the collection seam through which faults reach the real code.

Every node gets its own :class:`FaultyCollection` over one shared mongomock collection: the
node's real ``MongoScheduler`` reads and writes through it, and it decides, from virtual
time and the fault plan only (never from real time or call counts), whether an operation
fails (server outage), applies but loses its reply, or fails because the node was killed.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo.errors import AutoReconnect, PyMongoError

__all__ = [
    "EPOCH",
    "FaultyClient",
    "FaultyCollection",
    "FaultyDatabase",
    "NodeClock",
    "NodeKilled",
    "ReferenceClock",
    "StoreFaults",
]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Virtual time zero: where every simulation starts."""

_WRITES = frozenset(
    {
        "bulk_write",
        "delete_many",
        "delete_one",
        "find_one_and_update",
        "insert_many",
        "insert_one",
        "replace_one",
        "update_many",
        "update_one",
    }
)
_READS = frozenset(
    {"aggregate", "count_documents", "distinct", "estimated_document_count", "find", "find_one"}
)


class NodeKilled(PyMongoError):
    """Raised to a killed node's code by its collection: the process is gone (not transient,
    so nothing retries it)."""


class ReferenceClock:
    """The one true virtual time: the database's clock, by which invariants are judged."""

    def __init__(self) -> None:
        self.now = EPOCH

    def seconds(self, when: datetime | None = None) -> float:
        """``when`` (default now) as seconds since :data:`EPOCH`, for the trace."""
        return ((when or self.now) - EPOCH).total_seconds()


class NodeClock:
    """A node's own clock: the reference time plus the node's skew (which a fault may step,
    even backwards). ``monotonic`` ignores skew: it never goes back."""

    def __init__(self, reference: ReferenceClock) -> None:
        self._reference = reference
        self.skew = timedelta(0)

    def now(self) -> datetime:
        return self._reference.now + self.skew

    def monotonic(self) -> float:
        return self._reference.seconds()

    def __repr__(self) -> str:
        return f"NodeClock(skew={self.skew.total_seconds():+g}s)"


@dataclass
class StoreFaults:
    """The database faults in force, shared by every node's collection.

    ``outages``: ``[start, end)`` windows of reference time in which every operation fails
    with a transient error. ``lossy``: windows in which a write, with probability
    ``loss``, is applied but its reply is lost (a transient error after the write). Whether
    a given write loses its reply depends only on the seed, the node, the operation and the
    virtual instant, so a retry at the same instant meets the same fate."""

    seed: int
    outages: list[tuple[datetime, datetime]] = field(default_factory=list)
    lossy: list[tuple[datetime, datetime]] = field(default_factory=list)
    loss: float = 0.5
    slow: list[tuple[datetime, datetime]] = field(default_factory=list)
    stall: Callable[[float], None] | None = None
    """Lets ``seconds`` of virtual time pass before a slow reply arrives (the simulator's)."""

    def outage(self, now: datetime) -> bool:
        return any(start <= now < end for start, end in self.outages)

    def loses_reply(self, now: datetime, node: str, operation: str) -> bool:
        if not any(start <= now < end for start, end in self.lossy):
            return False
        return self._draw(now, node, operation) < self.loss

    def reply_delay(self, now: datetime, node: str, operation: str) -> float:
        """Seconds the reply to ``operation`` takes (0: at once): in a slow window, a third
        of the replies take 0.1 to 2 s, after the operation has applied."""
        if self.stall is None or not any(start <= now < end for start, end in self.slow):
            return 0.0
        draw = self._draw(now, node, f"slow {operation}")
        return round(0.1 + 5.7 * draw, 3) if draw < 1 / 3 else 0.0

    def _draw(self, now: datetime, node: str, operation: str) -> float:
        key = f"{self.seed}:{node}:{operation}:{now.isoformat()}".encode()
        return (zlib.crc32(key) % 1000) / 1000


class FaultyCollection:
    """A node's view of one (mongomock) collection, with the faults of the plan applied.

    Only what flowsched's Mongo adapter uses is forwarded: collection methods, ``name``,
    ``full_name``, ``database`` (whose collections are wrapped alike, and whose
    ``command("hello")`` answers with the reference clock's ``localTime``, so that code
    learning the server's time can learn it here)."""

    def __init__(
        self,
        inner: Any,
        node: str,
        clock: ReferenceClock,
        faults: StoreFaults,
        killed: Callable[[], bool],
        slowable: bool = True,
    ) -> None:
        # Only the items collection's replies are slow: the adapter holds a lock while it
        # creates indexes and checks the settings, which a stall (others running meanwhile,
        # on this one thread) would deadlock on.
        self._slowable = slowable
        self._inner = inner
        self._node = node
        self._clock = clock
        self._faults = faults
        self._killed = killed

    @property
    def name(self) -> str:
        return str(self._inner.name)

    @property
    def full_name(self) -> str:
        return str(self._inner.full_name)

    @property
    def database(self) -> FaultyDatabase:
        return FaultyDatabase(self)

    def sibling(self, name: str) -> FaultyCollection:
        """The collection ``name`` of the same database, with the same faults."""
        inner = self._inner.database[name]
        return FaultyCollection(
            inner, self._node, self._clock, self._faults, self._killed, slowable=False
        )

    def check(self, operation: str) -> None:
        """Raise what the node would meet now before ``operation`` reaches the server."""
        if self._killed():
            raise NodeKilled(f"node {self._node} was killed")
        if self._faults.outage(self._clock.now):
            raise AutoReconnect(f"simulated outage ({operation})")

    def __getattr__(self, attribute: str) -> Any:
        target = getattr(self._inner, attribute)
        if attribute in _WRITES:
            return self._write(attribute, target)
        if attribute in _READS:
            return self._read(attribute, target)
        if attribute in ("create_index", "drop_index", "index_information"):
            return self._admin(attribute, target)
        return target

    def _admin(self, operation: str, target: Callable[..., Any]) -> Callable[..., Any]:
        def admin(*args: Any, **kwargs: Any) -> Any:
            self.check(operation)
            return target(*args, **kwargs)

        return admin

    def _read(self, operation: str, target: Callable[..., Any]) -> Callable[..., Any]:
        def read(*args: Any, **kwargs: Any) -> Any:
            self.check(operation)
            result = target(*args, **kwargs)
            self._slow(operation)
            return result

        return read

    def _write(self, operation: str, target: Callable[..., Any]) -> Callable[..., Any]:
        def write(*args: Any, **kwargs: Any) -> Any:
            self.check(operation)
            result = target(*args, **kwargs)
            if self._faults.loses_reply(self._clock.now, self._node, operation):
                raise AutoReconnect(f"simulated lost reply ({operation} was applied)")
            self._slow(operation)
            return result

        return write

    def _slow(self, operation: str) -> None:
        if not self._slowable:
            return
        delay = self._faults.reply_delay(self._clock.now, self._node, operation)
        if delay and self._faults.stall is not None:
            self._faults.stall(delay)


class FaultyDatabase:
    """The database of a :class:`FaultyCollection`: its collections carry the same faults."""

    def __init__(self, collection: FaultyCollection) -> None:
        self._collection = collection

    @property
    def name(self) -> str:
        return str(self._collection._inner.database.name)

    def __getitem__(self, name: str) -> FaultyCollection:
        return self._collection.sibling(name)

    def get_collection(self, name: str, **_: Any) -> FaultyCollection:
        return self._collection.sibling(name)

    def command(self, command: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``hello``/``isMaster``/``ping`` answered from virtual time (mongomock has no
        server clock); anything else goes to mongomock."""
        name = command if isinstance(command, str) else next(iter(command))
        self._collection.check(f"command {name}")
        if name in ("hello", "isMaster", "ismaster", "ping"):
            now = self._collection._clock.now
            return {"ok": 1.0, "isWritablePrimary": True, "localTime": now}
        result: dict[str, Any] = self._collection._inner.database.command(command, *args, **kwargs)
        return result

    @property
    def client(self) -> FaultyClient:
        return FaultyClient(self._collection)


class FaultyClient:
    """The client of a :class:`FaultyDatabase`: ``admin.command("hello")`` answers from the
    reference clock too (where a driver-level server-time probe would ask)."""

    def __init__(self, collection: FaultyCollection) -> None:
        self._collection = collection

    @property
    def admin(self) -> FaultyDatabase:
        return FaultyDatabase(self._collection)

    def __getitem__(self, name: str) -> FaultyDatabase:
        return FaultyDatabase(self._collection)

    def close(self) -> None:
        return None
