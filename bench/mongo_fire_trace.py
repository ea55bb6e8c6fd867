"""Where a Mongo firing run's time goes: every command with its duration and thread.

    FLOWSCHED_MONGO_URI=... python bench/mongo_fire_trace.py sync|async

Runs one firing contender of ``bench/async_mongo_bench.py`` (2,000 timers due within 1 s by
default, ``FLOWSCHED_BENCH_FIRE`` / ``FLOWSCHED_BENCH_BACKGROUND`` as there) with a pymongo
command listener, then prints the contender's figures, the count and total duration of each
command name, and a 0.8 s window of commands from the settle a third of the way in (ops:
how many writes a write command carried). A diagnostic, not a benchmark: no medians, no peer.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pymongo import monitoring

sys.path.insert(0, str(Path(__file__).parent))
import async_mongo_bench

Event = tuple[float, float, str, str, int]


class Timeline(monitoring.CommandListener):
    """Every command that succeeded or failed: (start, seconds, name, thread, writes)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._open: dict[int, tuple[float, str, str, int]] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        command = event.command
        writes = command.get("ops", command.get("updates", command.get("deletes", [])))
        count = len(writes) if isinstance(writes, list) else 0
        name = threading.current_thread().name
        self._open[event.request_id] = (time.perf_counter(), event.command_name, name, count)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self._ended(event.request_id)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._ended(event.request_id)

    def _ended(self, request_id: int) -> None:
        opened = self._open.pop(request_id, None)
        if opened is not None:
            start, name, thread, count = opened
            self.events.append((start, time.perf_counter() - start, name, thread, count))


def main() -> None:
    timeline = Timeline()
    monitoring.register(timeline)
    uri = os.environ["FLOWSCHED_MONGO_URI"]
    figures: dict[str, Any] = async_mongo_bench.child(sys.argv[1], uri)
    print(json.dumps(figures))
    events = sorted(timeline.events)
    totals: dict[str, list[float]] = {}
    for _, seconds, name, _, _ in events:
        if name != "getMore":
            totals.setdefault(name, []).append(seconds)
    print({name: (len(s), round(sum(s), 2)) for name, s in totals.items()})
    # The settles (bulkWrite, a delete before MongoDB 8.0) happen only once firing began.
    settles = [e[0] for e in events if e[2] in ("bulkWrite", "delete")]
    if not settles:
        return
    origin = settles[len(settles) // 3]
    for start, seconds, name, thread, count in events:
        if origin <= start < origin + 0.8:
            at, took = 1000 * (start - origin), 1000 * seconds
            print(f"{at:8.1f} {took:7.1f} ms {name:10s} {thread:25s} ops={count}")


if __name__ == "__main__":
    main()
