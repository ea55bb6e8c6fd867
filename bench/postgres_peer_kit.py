"""What every peer of bench/postgres_peers.py shares: its command line and its one JSON line.

Standard library only, since each peer module runs in the peer's own virtualenv (without
flowsched). A peer module is run as

    bench/.venv-NAME/bin/python bench/postgres_peer_NAME.py --url URL --timers N [--limit S]

and prints one JSON line: ``fired``, ``fired_per_s`` (fired / (last handler start - first
due time)), ``p50_ms``/``p99_ms`` (handler start minus due, over what fired),
``statements_per_timer`` (statements sent per fired timer, or null where the peer gives no
way to count them) and ``finished`` (false when ``--limit`` seconds after the first due time
passed before all had fired: the figures are then over what fired by then).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from dataclasses import dataclass, field

WINDOW_S = 1.0
"""The timers are due uniformly over this many seconds."""
LIMIT_S = 60.0
"""By default a run stops this long after the first due time and reports what fired."""


@dataclass
class Args:
    url: str
    timers: int
    limit: float


def parse_args(doc: str | None) -> Args:
    parser = argparse.ArgumentParser(description=(doc or "").split("\n", 1)[0])
    parser.add_argument("--url", required=True, help="postgresql://... of the server")
    parser.add_argument("--timers", type=int, default=20_000)
    parser.add_argument(
        "--limit", type=float, default=LIMIT_S, help="seconds after the first due time"
    )
    ns = parser.parse_args()
    if ns.timers < 1:
        parser.error(f"--timers must be at least 1, got {ns.timers}")
    return Args(ns.url, ns.timers, ns.limit)


def fresh_name(peer: str) -> str:
    """A schema or table name no other run uses: ``bench_<peer>_<8 hex>``."""
    return f"bench_{peer}_{uuid.uuid4().hex[:8]}"


def due_times(start: float, timers: int) -> list[float]:
    """Epoch seconds, ``timers`` of them uniformly over ``WINDOW_S`` from ``start``."""
    return [start + n * WINDOW_S / timers for n in range(timers)]


@dataclass
class Lateness:
    """Filled by the handlers (thread-safe): lateness of each first run, last start time."""

    timers: int
    late: dict[str, float] = field(default_factory=dict)
    last: float = 0.0
    runs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)

    def record(self, key: str, due: float) -> None:
        """A handler started for timer ``key`` due at ``due``; call it first thing."""
        now = time.time()
        with self.lock:
            self.runs += 1
            if key not in self.late:
                self.late[key] = now - due
                self.last = now
                if len(self.late) >= self.timers:
                    self.done.set()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(seen: Lateness, start: float, statements: int | None) -> None:
    """Print the run's one JSON line (``start`` is the first due time)."""
    with seen.lock:
        late = list(seen.late.values())
        last, runs = seen.last, seen.runs
    fired = len(late)
    print(
        json.dumps(
            {
                "fired": fired,
                "fired_per_s": fired / max(last - start, 1e-9) if fired else 0.0,
                "p50_ms": 1000 * _percentile(late, 0.5),
                "p99_ms": 1000 * _percentile(late, 0.99),
                "statements_per_timer": (
                    None if statements is None else statements / max(fired, 1)
                ),
                "duplicates": runs - fired,
                "finished": fired >= seen.timers,
            }
        ),
        flush=True,
    )
