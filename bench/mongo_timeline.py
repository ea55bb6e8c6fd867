"""Where the threaded MongoDB node's firing window goes: its commands in time, one run.

    python bench/mongo_timeline.py URI [VARIANT] [--list]

Runs ``async_mongo_bench``'s ``sync`` contender (``MongoScheduler``, 8 worker threads, 2,000
timers due within 1 s, batches of 100) once in this process, with ``bench/promise_cost.py``'s
VARIANT switched off when given (``bare``, ``bare-deep``, ...; none: the code on
``PYTHONPATH``, so main 989defa runs through the same script with
``PYTHONPATH=/tmp/base989``). Every command the node sends is timed from pymongo's
``started`` to its ``succeeded`` event. Prints, as one JSON line, over the firing window (the
first due time to the node's last settle, a ``delete`` or a ``bulkWrite``):

* ``window_s``: that window; ``busy``: the share of it with at least one command in flight
  (the change stream's awaiting ``getMore`` and the node's heartbeats left out): near 1, the
  single-threaded test server is the bound; lower, the node left it idle; and that busy time
  per fired timer (``busy_ms_per_fired``);
* per kind (``find``, ``update``, ``delete``, ...): commands per 100 fired timers and the
  median command's statements and milliseconds.

``--list`` also prints every command of the window, one a line. The ``promise_cost``
variants are patches of this process's classes; nothing here is a setting of flowsched.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import async_mongo_bench as amb
import mongo_bench as mb
from pymongo import monitoring

Span = tuple[float, float, str, int]  # start, end (monotonic s), command:collection, statements


class Timeline(mb.Commands):
    """``mb.Commands`` (the bench's round-trip count) that also times every command."""

    def __init__(self) -> None:
        super().__init__()
        self.open: dict[int, tuple[float, str, int]] = {}
        self.spans: list[Span] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        super().started(event)
        if event.command.get("comment") == mb.UNCOUNTED:
            return
        name, command = event.command_name, event.command
        target = command.get(name)
        kind = f"{name}:{target}" if isinstance(target, str) else name
        size = len(command.get("updates", command.get("deletes", ())))
        self.open[event.request_id] = (time.monotonic(), kind, size)

    def _end(self, request_id: int) -> None:
        opened = self.open.pop(request_id, None)
        if opened is not None:
            self.spans.append((opened[0], time.monotonic(), opened[1], opened[2]))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self._end(event.request_id)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._end(event.request_id)


def busy_time(spans: list[Span]) -> float:
    """The length of the union of the spans' intervals."""
    total, start, end = 0.0, None, None
    for s, e, _, _ in sorted(spans):
        if end is None or s > end:
            total += 0.0 if end is None or start is None else end - start
            start, end = s, e
        else:
            end = max(end, e)
    return total + (0.0 if end is None or start is None else end - start)


def summary(spans: list[Span], first: float, fired: int) -> dict[str, Any]:
    # A settle: a delete of the timers, or a client-level bulkWrite (the settle and its
    # history in one command, where the server has it).
    settles = [s for s in spans if s[2] in ("delete:timers", "bulkWrite") and s[0] >= first]
    if not settles:
        raise SystemExit("no settle in the run")
    last = max(s[1] for s in settles)
    window = [s for s in spans if s[0] >= first and s[1] <= last]
    work = [s for s in window if s[2] != "getMore" and not s[2].endswith("_nodes")]
    kinds: dict[str, Any] = {}
    for kind in sorted({s[2] for s in window}):
        mine = [s for s in window if s[2] == kind]
        kinds[kind] = {
            "per_100_fired": round(100 * len(mine) / fired, 2),
            "statements": statistics.median(s[3] for s in mine),
            "ms": round(1000 * statistics.median(s[1] - s[0] for s in mine), 1),
        }
    return {
        "window_s": round(last - first, 3),
        "busy": round(busy_time(work) / (last - first), 3),
        "busy_ms_per_fired": round(1000 * busy_time(work) / fired, 3),
        "kinds": kinds,
    }


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--list"]
    if not 1 <= len(args) <= 2:
        raise SystemExit(__doc__)
    if len(args) == 2:
        import promise_cost

        promise_cost.switch_off(args[1])
    timeline = Timeline()
    mb.Commands = lambda: timeline  # type: ignore[assignment,misc]
    dues: list[datetime] = []
    due_times = mb.due_times

    def recorded(count: int, lead: timedelta) -> list[datetime]:
        dues.extend(due_times(count, lead))
        return dues

    mb.due_times = recorded
    result = amb.run_sync(args[0])
    first = time.monotonic() - (datetime.now(UTC) - dues[0]).total_seconds()
    window = summary(timeline.spans, first, int(result["fired"]))
    print(json.dumps({"fired_per_s": result["fired_per_s"], **window}))
    if "--list" in sys.argv:
        t0 = min(s[0] for s in timeline.spans)
        for s, e, kind, size in sorted(timeline.spans):
            print(f"{s - t0:8.3f} {e - t0:8.3f} {1000 * (e - s):7.1f} ms  {kind} {size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
