"""Command monitoring for wire tests: every command a client sends (one command = one round
trip), as ``(name, collection, command)``."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pymongo import MongoClient, monitoring

Sent = tuple[str, str, dict[str, Any]]


class Commands(monitoring.CommandListener):
    """Records the commands a client sends; :meth:`take` hands them over and starts afresh."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: list[Sent] = []
        self.threads: list[int] = []
        """The thread that sent each of :attr:`sent` (pymongo calls :meth:`started` in it)."""
        self.replies: list[tuple[str, dict[str, Any]]] = []
        """Each reply, as ``(command name, reply)``, in the order they came."""

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        name = event.command_name
        with self._lock:  # the two lists stay in step for take_mine
            self.sent.append((name, str(event.command.get(name)), dict(event.command)))
            self.threads.append(threading.get_ident())

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self.replies.append((event.command_name, dict(event.reply)))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> list[Sent]:
        with self._lock:
            sent, self.sent, self.threads = self.sent, [], []
        return sent

    def take_mine(self) -> list[Sent]:
        """What the calling thread sent since the last take (not a running node's own
        threads: its claims, settles and next-due queries); all of it is taken."""
        return self._take_by(mine=True)

    def take_others(self) -> list[Sent]:
        """What other threads sent since the last take (a running node's, not the test's
        own reads while it waits); all of it is taken."""
        return self._take_by(mine=False)

    def _take_by(self, *, mine: bool) -> list[Sent]:
        with self._lock:
            sent, threads = self.sent, self.threads
            self.sent, self.threads = [], []
        here = threading.get_ident()
        return [one for one, by in zip(sent, threads, strict=True) if (by == here) == mine]

    def take_names(self) -> Counter[str]:
        """How many commands of each name were sent since the last take."""
        return Counter(name for name, _, _ in self.take())

    def take_on(self) -> Counter[tuple[str, str]]:
        """How many commands of each (name, collection) were sent since the last take."""
        return Counter((name, collection) for name, collection, _ in self.take())


def statements(sent: list[Sent]) -> list[tuple[str, str]]:
    """The writes sent, as ``(kind, collection)`` in order (``update``, ``delete``, ...): a
    command's statements, and each operation of a client-level ``bulkWrite`` (MongoDB 8.0+);
    any other command as ``(name, collection)``."""
    out: list[tuple[str, str]] = []
    for name, on, command in sent:
        if name == "bulkWrite":
            spaces = [info["ns"].rsplit(".", 1)[1] for info in command["nsInfo"]]
            for op in command["ops"]:
                kind = next(k for k in ("insert", "update", "delete") if k in op)
                out.append((kind, spaces[op[kind]]))
        else:
            rows = command.get("updates") or command.get("deletes") or command.get("documents")
            out += [(name, on)] * (len(rows) if rows else 1)
    return out


def bulk_write_capable(database: Any) -> bool:
    """Whether the server takes a client-level ``bulkWrite`` (MongoDB 8.0+: wire version 25)."""
    hello: dict[str, Any] = database.client.admin.command("hello")
    return int(hello.get("maxWireVersion", 0)) >= 25


@contextmanager
def monitored_database(mongo_uri: str, prefix: str) -> Iterator[tuple[Any, Commands]]:
    """A fresh database on the wire server whose client records its commands; dropped after."""
    commands = Commands()
    client: Any = MongoClient(mongo_uri, event_listeners=[commands], tz_aware=True)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        yield client[name], commands
    finally:
        client.drop_database(name)
        client.close()
