"""Internal: ``flowsched console`` — serve the operator console (``flowsched[console]``).

The console's modules (Starlette, Jinja2, uvicorn, the async driver) are imported only when
the verb runs, so every other verb starts without them.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from flowsched.cli._output import fail
from flowsched.cli.mongo_target import ConfigOption, Connection, UriOption, redact

__all__ = ["register"]

DEFAULT_PORT = 8765


def register(app: typer.Typer) -> None:
    """Add the ``console`` verb to ``app``."""
    app.command("console")(console)


def console(
    config: ConfigOption = None,
    uri: UriOption = None,
    database: Annotated[
        str | None,
        typer.Option(
            "--database", "--db", metavar="NAME", help="Database name (default: the URI's)."
        ),
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option("--collection", metavar="NAME", help="The scheduler's collection."),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port.")] = DEFAULT_PORT,
    token_file: Annotated[
        str | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="File holding the operator token; without it the console is read-only.",
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="DURATION",
            help="Longest a page's query may run before the server stops it (e.g. 5s).",
        ),
    ] = None,
) -> None:
    """Serve the operator console: timers, dead letters, nodes, due load (read-only unless
    --token-file is given)."""
    try:
        import uvicorn

        from flowsched.console import app as console_app
    except ImportError as exc:
        fail(f"flowsched console needs its extra: pip install 'flowsched[console]' ({exc.name})")
    # The timers verbs' connection: options over --config (or FLOWSCHED_CONFIG) over defaults.
    target = Connection(config, uri, database, collection, timeout).target()  # exits 2 if bad
    try:
        application = console_app(
            target.uri,
            database=target.db,
            collection=target.collection,
            token_file=token_file,
            query_budget_ms=max(1, int(target.timeout.total_seconds() * 1000)),
        )
    except (OSError, ValueError) as exc:
        fail(str(exc))
    mode = "read-only" if token_file is None else "actions need the token"
    typer.echo(
        f"flowsched console on http://{host}:{port}/ for {redact(target.uri)} "
        f"{target.namespace} ({mode})"
    )
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # uvicorn's access log shows paths only, never the URI.
    uvicorn.run(application, host=host, port=port, log_level="info")
