"""Internal: ``flowsched simulate --node-core`` - seeds of node cores over the reference store
(:mod:`flowsched.testing.node_simulation`): busy workers, slow, lost and asymmetric round
trips, skewed clocks measured through the clock filter."""

from __future__ import annotations

import logging
import time

import typer

__all__ = ["run_node_seeds"]


def run_node_seeds(first: int, count: int, *, nodes: int, plant: str | None) -> int:
    """Run seeds ``first`` .. ``first + count - 1``; print the first broken one and return 1,
    or print a summary and return 0 (2: an unknown plant)."""
    from flowsched.testing.node_simulation import PLANTS, simulate_nodes

    if plant not in PLANTS:
        known = ", ".join(sorted(str(name) for name in PLANTS if name is not None))
        typer.echo(f"Error: --plant {plant!r} is not a node-core plant ({known})", err=True)
        return 2
    quiet = logging.getLogger("flowsched.node")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # outages are simulated by the thousand
    started = time.perf_counter()
    try:
        for seed in range(first, first + count):
            broken = simulate_nodes(seed, nodes=nodes, plant=plant)
            if broken:
                ran = seed - first + 1
                typer.echo("\n".join(broken[:10]))
                typer.echo(f"broken at seed {seed} after {ran} seeds (--node-core --seed {seed})")
                return 1
    finally:
        quiet.setLevel(level)
    seconds = time.perf_counter() - started
    typer.echo(f"ok: {count} node-core seeds in {seconds:.1f}s, {nodes} nodes, 0 broken")
    return 0
