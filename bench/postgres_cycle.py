"""Where a PostgreSQL node's firing cycle goes, in one run of ``postgres_bench.py``.

    FLOWSCHED_POSTGRES_URL=... python bench/postgres_cycle.py [--face sync|async|floor]

Runs one contender of ``bench/postgres_bench.py`` (20,000 timers due within 1 s, in this
process) and prints, besides its figures:

* **the cycle** (not for the floor): the store's ``claim_started`` and ``settle`` calls are
  timed; per full claim, its round trip and the time from its answer to the next claim (the
  hand-off: decoding its rows, running its handlers, freeing the slots), and the settle's
  round trip, medians and 90th percentiles. At ``workers`` slots the node can fire at most
  ``workers / (claim round trip + hand-off)`` timers a second.
* **the CPU** of the firing window (the first due time to the last handler start): the
  server's for this process (the backends serving its connections, read from ``/proc``:
  the server must run on this host; shared work such as the WAL writer is not counted)
  and this process's, in cores and in microseconds per fired timer.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import itertools
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

_TICK = os.sysconf("SC_CLK_TCK")


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "pb", Path(__file__).with_name("postgres_bench.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _postmaster(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        stat = Path(f"/proc/{row[0]}/stat").read_text()  # while the backend lives
    return int(stat.rsplit(")", 1)[1].split()[1])  # the backend's parent


def _our_ports() -> set[str]:
    """The local TCP ports of this process's sockets (its connections to the server)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(str(int(fields[1].rsplit(":", 1)[1], 16)))
    return ports


_SEEN: dict[str, float] = {}
"""The last CPU seconds read of each backend that served this process (one that ended
keeps its last reading: a connection closed in the window does not take its CPU along)."""


def _server_cpu(postmaster: int) -> float:
    """CPU seconds of the server processes that serve this process's connections (the
    backends whose title names one of its ports; the shared server may serve others too)."""
    ports = _our_ports()
    for pid in Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split():
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if "(" in title and title.split("(", 1)[1].split(")", 1)[0] in ports:
            _SEEN[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    return sum(_SEEN.values())


def _traced(cls: type, name: str, calls: list[tuple[str, float, float, int]]) -> None:
    method: Callable[..., Any] = getattr(cls, name)
    if inspect.iscoroutinefunction(method):

        async def timed_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            began = time.time()
            result = await method(self, *args, **kwargs)
            calls.append((name, began, time.time(), len(result)))
            return result

        setattr(cls, name, timed_async)
        return

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.time()
        result = method(self, *args, **kwargs)
        calls.append((name, began, time.time(), len(result)))
        return result

    setattr(cls, name, timed)


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{statistics.median(ordered):.2f} (p90 {ordered[int(0.9 * len(ordered))]:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--face", choices=["sync", "async", "floor"], default="sync")
    args = parser.parse_args()
    bench = _bench()
    url = bench._url()
    postmaster = _postmaster(url)
    calls: list[tuple[str, float, float, int]] = []
    if args.face != "floor":
        from flowsched.postgres.async_store import AsyncPostgresTimerStore
        from flowsched.postgres.store import PostgresTimerStore

        store_class = PostgresTimerStore if args.face == "sync" else AsyncPostgresTimerStore
        for name in ("claim_started", "settle"):
            _traced(store_class, name, calls)
    samples: list[tuple[float, float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        # The process's CPU less this thread's own (reading /proc is not the node's work).
        while not stop.is_set():
            times = os.times()
            own = time.thread_time()
            samples.append((time.time(), _server_cpu(postmaster), times.user + times.system - own))
            stop.wait(0.05)

    window: dict[str, float] = {}
    figures = bench._figures

    def kept(late: list[float], start: float, last: float, *rest: Any) -> dict[str, float]:
        window["start"], window["last"] = start, last
        result: dict[str, float] = figures(late, start, last, *rest)
        return result

    bench._figures = kept
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    contender = {"sync": "flowsched", "async": "flowsched-async", "floor": "floor"}[args.face]
    result = bench.CONTENDERS[contender](url, 20_000)
    stop.set()
    sampler.join()
    first = min(samples, key=lambda s: abs(s[0] - window["start"]))
    last = min(samples, key=lambda s: abs(s[0] - window["last"]))
    seconds = max(last[0] - first[0], 1e-9)
    fired = result["fired"]
    result["server_cores"] = (last[1] - first[1]) / seconds
    result["client_cores"] = (last[2] - first[2]) / seconds
    result["server_us_per_timer"] = 1e6 * (last[1] - first[1]) / fired
    result["client_us_per_timer"] = 1e6 * (last[2] - first[2]) / fired
    print(json.dumps({key: round(value, 3) for key, value in result.items()}))
    if not calls:
        return
    claims = [c for c in calls if c[0] == "claim_started" and c[1] >= window["start"] - 0.01]
    full = max((c[3] for c in claims), default=0)
    trips = [1000 * (c[2] - c[1]) for c in claims if c[3] == full]
    handoffs = [1000 * (b[1] - a[2]) for a, b in itertools.pairwise(claims) if a[3] == full]
    settles = [1000 * (c[2] - c[1]) for c in calls if c[0] == "settle" and c[3] == full]
    print(
        f"claims of {full}: {len(trips)}; round trip {_spread(trips)} ms; answer to next claim "
        f"{_spread(handoffs)} ms; settle {_spread(settles)} ms"
    )


if __name__ == "__main__":
    main()
