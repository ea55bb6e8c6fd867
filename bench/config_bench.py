"""How long one action-policy resolution takes with 10,000 action keys loaded.

Measured in one run, median of several repeats, time.perf_counter_ns:

* first look-up: a (flow, state, action) never resolved before (index walk + policy built);
* cached look-up: the same triple again;
* naive scan: what resolving costs without an index: every key checked against the eight
  precedence levels for every type.

Prints a table and writes bench/results/config.json. Target: <= 5 us per resolution.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from flowsched import SchedulingConfig
from flowsched.config import ActionKey, precedence

KEYS = 10_000
REPEATS = 7
TARGET_NS = 5_000
TYPES = {
    "timeout-duration": lambda rng: f"{rng.randint(1, 120)}s",
    "max-retries": lambda rng: str(rng.randint(0, 5)),
    "initial-retry-interval": lambda rng: str(rng.choice([500, 1000, 2000])),
    "backoff-type": lambda rng: rng.choice(["EXPONENTIAL", "LINEAR"]),
    "jitter-enabled": lambda rng: rng.choice(["true", "false"]),
    "jitter-factor": lambda rng: str(rng.choice([0.1, 0.2, 0.5])),
}


def configuration(rng: random.Random) -> str:
    """10,000 distinct action keys over 200 flows x 10 states x 10 actions, some with Any."""
    flows = ["Any"] + [f"Flow{i}" for i in range(200)] * 4
    states = ["Any"] + [f"State{i}" for i in range(10)] * 8
    actions = ["Any"] + [f"Action{i}" for i in range(10)] * 8
    lines: dict[str, str] = {}
    while len(lines) < KEYS:
        kind = rng.choice(list(TYPES))
        key = f"{rng.choice(flows)}.{rng.choice(states)}.{rng.choice(actions)}.{kind}"
        lines.setdefault(key, f"{key} = {TYPES[kind](rng)}")
    return "\n".join(lines.values())


def triples(rng: random.Random, count: int, tag: str) -> list[tuple[str, str, str]]:
    """Look-ups: mostly configured names, some a flow that only wildcards match."""
    found = []
    for i in range(count):
        flow = f"Flow{rng.randrange(200)}" if i % 4 else f"Unknown{tag}{i}"
        found.append((flow, f"State{rng.randrange(10)}", f"Action{rng.randrange(10)}"))
    return found


def naive_resolver(keys: tuple[ActionKey, ...]) -> Callable[[str, str, str], dict[str, object]]:
    """Resolution without an index: scan every key, keep the best level per type."""

    def resolve(flow: str, state: str, action: str) -> dict[str, object]:
        rank = {triple: level for level, triple in enumerate(precedence(flow, state, action))}
        best: dict[str, tuple[int, object]] = {}
        for key in keys:
            level = rank.get(key.triple)
            if level is not None and (key.type not in best or level < best[key.type][0]):
                best[key.type] = (level, key.value)
        return {kind: value for kind, (_, value) in best.items()}

    return resolve


def per_call_ns(run: Callable[[], int]) -> list[float]:
    """Repeat ``run`` (which returns how many resolutions it did); ns per resolution each time."""
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        calls = run()
        samples.append((time.perf_counter_ns() - start) / calls)
    return samples


def main() -> None:
    rng = random.Random(2024)
    text = configuration(rng)
    started = time.perf_counter()
    config = SchedulingConfig.from_string(text)
    load_seconds = time.perf_counter() - started
    assert len(config.action_keys()) == KEYS, len(config.action_keys())

    fresh = [triples(rng, 2_000, f"r{repeat}_") for repeat in range(REPEATS)]
    fresh_iter = iter(fresh)

    def first_lookups() -> int:
        batch = next(fresh_iter)  # never resolved before: nothing cached
        for triple in batch:
            config.action(*triple)
        return len(batch)

    hot = triples(rng, 1_000, "hot")
    for triple in hot:
        config.action(*triple)

    def cached_lookups() -> int:
        for _ in range(100):
            for triple in hot:
                config.action(*triple)
        return 100 * len(hot)

    naive = naive_resolver(config.action_keys())
    sample = hot[:50]

    def naive_lookups() -> int:
        for triple in sample:
            naive(*triple)
        return len(sample)

    # The naive scan must agree with the index, or the comparison means nothing.
    for triple in sample:
        policy = config.action(*triple)
        assert naive(*triple).get("max-retries", 0) == policy.retry.max_retries

    results = {
        "first (uncached) lookup": per_call_ns(first_lookups),
        "cached lookup": per_call_ns(cached_lookups),
        "naive scan of all keys": per_call_ns(naive_lookups),
    }
    report(results, load_seconds)


def report(results: dict[str, list[float]], load_seconds: float) -> None:
    naive = statistics.median(results["naive scan of all keys"])
    rows = []
    print(f"config_bench: {KEYS} action keys loaded in {load_seconds:.2f} s")
    print(f"{'resolution':<26} {'median':>12} {'min':>12} {'x faster than naive':>20}  target")
    for name, samples in results.items():
        median = statistics.median(samples)
        within = "ok" if median <= TARGET_NS else "MISSED"
        target = "-" if name.startswith("naive") else f"<= 5 us {within}"
        print(
            f"{name:<26} {median / 1000:>9.2f} us {min(samples) / 1000:>9.2f} us "
            f"{naive / median:>19.0f}x  {target}"
        )
        rows.append(
            {"case": name, "median_ns": round(median), "min_ns": round(min(samples)),
             "samples_ns": [round(s) for s in samples], "speedup_vs_naive": naive / median}
        )  # fmt: skip
    out = Path(__file__).resolve().parent / "results" / "config.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "config resolution",
                "keys": KEYS,
                "repeats": REPEATS,
                "target_ns": TARGET_NS,
                "load_seconds": round(load_seconds, 3),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "results": rows,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"written {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")


if __name__ == "__main__":
    main()
