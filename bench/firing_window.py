"""Where a Mongo firing run spends its time: the async and threaded faces, round by round.

    python bench/firing_window.py [ROUNDS]   # needs FLOWSCHED_MONGO_URI; the server local

Runs ``bench/async_mongo_bench.py``'s own ``async`` and ``sync`` contenders (2,000 timers
due within 1 s, batch 100), alternating, each in a fresh process, with a timeline of every
command (pymongo command monitoring) and the server process's CPU time sampled every 20 ms.
Per run it reports the fire rate as that bench counts it and:

* ``first claim``: from the first due time to the start of the first claim (an ``update``
  command with a multi-document statement on the timers: what a claim sends);
* ``window``: from the first claim's start to the end of the last delete (the settles);
* ``server busy``: the server's CPU seconds per wall second in that window (the wire
  server is one process: near 100% means it, not the node, sets the pace);
* ``nothing in flight``: the share of that window in which the node had no command at the
  server (the server waited on the node);
* ``overlapped``: the share of that window with two or more of the node's commands at the
  server at once (the async face writes outcomes while it claims; the threaded one sends
  one command at a time);
* ``server CPU per timer`` and ``client CPU per timer`` in that window;
* ``claimed per claim`` (median documents a claiming update modified) and the commands
  sent in the window by kind, with their time as the client saw it per timer (commands in
  flight together each count their whole time).

A diagnostic beside the fire-rate bench (not part of ``make bench``): it explains a rate,
it is not a figure against a peer. Writes bench/results/firing_window.json.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import async_mongo_bench as amb
import mongo_bench as mb
from pymongo import monitoring

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "firing_window.json"
SAMPLE_EVERY = 0.02


class Timeline(mb.Commands):
    """The bench's command counter, also keeping each command's start, length and kind."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: dict[int, tuple[float, str]] = {}
        self.done: list[tuple[float, float, str]] = []  # (start, end, kind)
        self.taken: list[float] = []
        self.claimed: list[tuple[float, int]] = []  # (start, documents claimed)

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        super().started(event)
        if event.command.get("comment") == mb.UNCOUNTED:
            return
        kind = event.command_name
        if kind == "update" and any(s.get("multi") for s in event.command.get("updates", [])):
            kind = "claim"
        self.opened[event.request_id] = (time.perf_counter(), kind)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        opened = self.opened.pop(event.request_id, None)
        if opened is not None:
            start, kind = opened
            self.done.append((start, start + event.duration_micros / 1e6, kind))
            if kind == "claim":
                self.claimed.append((start, int(event.reply.get("nModified", 0))))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self.opened.pop(event.request_id, None)

    def take(self) -> int:
        self.taken.append(time.perf_counter())
        return super().take()


class DueFirings(mb.Firings):
    """The bench's firings, also keeping the first due time on the monotonic clock."""

    first_due: float | None = None

    def summary(self, first_due: datetime, round_trips: int) -> dict[str, float]:
        ahead = first_due.timestamp() - datetime.now(UTC).timestamp()
        DueFirings.first_due = time.perf_counter() + ahead
        return super().summary(first_due, round_trips)


def _overlapped(spans: list[tuple[float, float]], first: float, end: float) -> float:
    """Seconds within ``first``..``end`` during which two or more ``spans`` were open (a
    change stream's ``getMore`` is left out by the caller: it waits at the server)."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    depth, since, total = 0, first, 0.0
    for moment, step in edges:
        if depth >= 2:
            total += max(0.0, min(moment, end) - max(since, first))
        depth += step
        since = moment
    return total


def child(contender: str, uri: str) -> dict[str, Any]:
    port = urlparse(uri.split(",")[0]).port or 27017
    pid = mb.server_pid(port)
    if pid is None:
        sys.exit("the server's CPU is read from /proc: run it on this machine")
    timelines: list[Timeline] = []

    def timeline() -> Timeline:
        timelines.append(Timeline())
        return timelines[-1]

    # The contender's run is the fire-rate bench's, unchanged: only its counter and firings
    # are these subclasses.
    mb.Commands = timeline  # type: ignore[assignment,misc]
    mb.Firings = DueFirings  # type: ignore[misc]
    samples: list[tuple[float, float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.perf_counter(), mb.cpu_seconds(pid), time.process_time()))
            stop.wait(SAMPLE_EVERY)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = amb.child(contender, uri)
    stop.set()
    sampler.join()
    done = timelines[0].done
    firing_from = timelines[0].taken[0]
    first = min(s for s, _, kind in done if kind == "claim" and s >= firing_from)
    end = max(e for s, e, kind in done if kind == "delete" and s >= firing_from)

    def at(moment: float) -> tuple[float, float, float]:
        return min(samples, key=lambda sample: abs(sample[0] - moment))

    (t0, server0, client0), (t1, server1, client1) = at(first), at(end)
    # How much of the window had no command of the node's in flight: the server waited on it.
    spans = sorted((s, e) for s, e, _ in done if e > first and s < end)
    waited, reach = 0.0, first
    for began, ended in spans:
        waited += max(0.0, began - reach)
        reach = max(reach, ended)
    fired = result["fired"]
    assert DueFirings.first_due is not None
    sizes = [n for start, n in timelines[0].claimed if first <= start <= end]
    kinds = Counter(kind for s, _, kind in done if first <= s <= end)
    overlapped = _overlapped([(s, e) for s, e, kind in done if kind != "getMore"], first, end)
    spent: Counter[str] = Counter()
    for began, ended, kind in done:
        if first <= began <= end:
            spent[kind] += (ended - began) * 1000 / fired
    return {
        "contender": contender,
        "fired_per_s": result["fired_per_s"],
        "first_claim_ms": round((first - DueFirings.first_due) * 1000, 1),
        "window_s": round(end - first, 3),
        "server_busy": round((server1 - server0) / (t1 - t0), 3),
        "nothing_in_flight": round(waited / (end - first), 3),
        "overlapped": round(overlapped / (end - first), 3),
        "server_cpu_ms_per_timer": round((server1 - server0) / fired * 1000, 3),
        "client_cpu_ms_per_timer": round((client1 - client0) / fired * 1000, 3),
        "claimed_per_claim": statistics.median(sizes) if sizes else 0,
        "commands": dict(sorted(kinds.items())),
        "command_ms_per_timer": {kind: round(ms, 3) for kind, ms in sorted(spent.items())},
    }


def main() -> int:
    uri = os.environ.get("FLOWSCHED_MONGO_URI")
    if not uri:
        sys.exit("set FLOWSCHED_MONGO_URI (a wire server on this machine)")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    runs: list[dict[str, Any]] = []
    for _ in range(rounds):
        for contender in ("async", "sync"):
            command = [sys.executable, __file__, "--child", contender, uri]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{contender} failed:\n{done.stderr[-3000:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"  {runs[-1]}", file=sys.stderr)
    columns = list(runs[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for run in runs:
        print("| " + " | ".join(str(run[c]) for c in columns) + " |")
    results = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "runs": runs}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    sys.exit(main())
