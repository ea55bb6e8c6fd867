"""Internal: ``flowsched simulate`` — run the deterministic cluster simulator over seeds."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to ``app``."""
    app.command()(simulate)


def simulate(
    seeds: Annotated[
        int | None, typer.Option(min=1, help="How many seeds to run (from --seed) [100].")
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="The first seed; alone, replay just this one and print its trace."),
    ] = None,
    nodes: Annotated[int, typer.Option(min=1, max=16, help="Scheduler nodes.")] = 3,
    timers: Annotated[int, typer.Option(min=1, max=500, help="Timers per seed.")] = 12,
    faults: Annotated[
        str,
        typer.Option(help="Faults: all, none, names (kill,outage,...), -name to drop one."),
    ] = "all",
    keep: Annotated[
        str | None,
        typer.Option(help="Replay only these plan events (indexes, as a report gives them)."),
    ] = None,
    plant: Annotated[
        str | None,
        typer.Option(help="Plant a known bug first (settle-unfenced, claim-ignores-lease, ...)."),
    ] = None,
    jobs: Annotated[int, typer.Option(min=1, max=64, help="Processes to run seeds on.")] = 1,
    trace: Annotated[bool, typer.Option(help="Print the trace of a seed that passes too.")] = False,
    node_core: Annotated[
        bool,
        typer.Option(
            "--node-core",
            help="Simulate node cores over the reference store instead (plants: no-confirm, "
            "drop-settle, midpoint-clock).",
        ),
    ] = False,
) -> None:
    """Simulate a cluster of real MongoScheduler nodes under faults, seed by seed, and check
    the invariants of CONTRACT section 14; exit 1 at the first seed that breaks one, printing
    its minimal trace and the command that replays it."""
    if node_core:
        from flowsched.cli.simulate_nodes import run_node_seeds

        raise typer.Exit(run_node_seeds(seed or 0, seeds or 100, nodes=nodes, plant=plant))
    # Imported here: the simulator (and mongomock) load only for this verb.
    try:
        from flowsched.testing.simulation import Faults
        from flowsched.testing.simulation import simulate as run_one
        from flowsched.testing.simulation._seeds import run_seeds
        from flowsched.testing.simulation.mutations import planted
    except ImportError as exc:  # mongomock missing
        typer.echo(f"flowsched simulate needs flowsched[testing] (mongomock): {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        spec = Faults.parse(faults).spec()
        kept = _indexes(keep)
        if plant is not None:
            planted(plant)  # validates the name
    except ValueError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(2) from None
    if seeds is None and (seed is not None or kept is not None):
        try:
            report = run_one(
                seed or 0, nodes=nodes, timers=timers, faults=spec, keep=kept, plant=plant
            )
        except ValueError as exc:  # a --keep event outside the seed's plan
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(2) from None
        if trace or not report.ok:
            typer.echo(report.summary() if not report.ok else "\n".join(report.trace))
        typer.echo(f"seed {report.seed}: {'ok' if report.ok else 'BROKEN'}")
        raise typer.Exit(0 if report.ok else 1)
    count = seeds or 100
    first = seed or 0
    result = run_seeds(
        first, count, nodes=nodes, timers=timers, faults=spec, plant=plant, jobs=jobs
    )
    rate = f"{result.ran} seeds in {result.seconds:.1f}s ({result.per_second:.1f} seeds/s)"
    if result.failure is not None:
        typer.echo(result.failure.summary())
        typer.echo(f"broken at seed {result.failure.seed} after {rate}")
        raise typer.Exit(1)
    typer.echo(f"ok: {rate}, faults {spec}, {nodes} nodes, {timers} timers, 0 broken")


def _indexes(text: str | None) -> list[int] | None:
    if text is None:
        return None
    if text.strip() in ("", "none"):
        return []
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--keep takes comma-separated event indexes (got {text!r})") from None
