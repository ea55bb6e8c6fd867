"""Internal: ``flowsched console`` — serve the operator console (``flowsched[console]``), and
``flowsched console hash-secret`` — make a users file's hash.

The console's modules (Starlette, Jinja2, uvicorn, the async driver) are imported only when
the verb runs, so every other verb starts without them.
"""

from __future__ import annotations

import getpass
import ipaddress
import logging
import sys
from typing import Annotated, Any

import typer

from flowsched.cli._output import fail
from flowsched.cli.mongo_target import ConfigOption, Connection, UriOption, redact

__all__ = ["register"]

DEFAULT_PORT = 8765


def register(app: typer.Typer) -> None:
    """Add the ``console`` verb (and its ``hash-secret``) to ``app``."""
    group = typer.Typer(rich_markup_mode=None, add_completion=False)
    group.callback(invoke_without_command=True)(console)
    group.command("hash-secret")(hash_secret)
    app.add_typer(group, name="console")


def hash_secret() -> None:
    """Ask for a secret (no echo; read from standard input when it is no terminal) and print
    its hash for a users file line ``name:role:HASH`` (scrypt, salted)."""
    from flowsched.console.identity import hash_secret as make

    if sys.stdin.isatty():
        secret = getpass.getpass("Secret: ")
        if getpass.getpass("Again: ") != secret:
            fail("the two secrets differ")
    else:
        secret = sys.stdin.readline().rstrip("\r\n")
    try:
        typer.echo(make(secret))
    except ValueError as exc:
        fail(str(exc))


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def console(
    ctx: typer.Context,
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
    table: Annotated[
        str | None,
        typer.Option(
            "--table",
            metavar="NAME",
            help="With a postgresql:// --uri: the timers table [default: flowsched_timers].",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port.")] = DEFAULT_PORT,
    users_file: Annotated[
        str | None,
        typer.Option(
            "--users-file",
            metavar="FILE",
            help="Identities, one a line: name:role:hash (role viewer or operator; the hash "
            "from 'flowsched console hash-secret').",
        ),
    ] = None,
    token_file: Annotated[
        str | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="File holding the operator token: one operator identity, 'token'.",
        ),
    ] = None,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            "--trusted-proxy",
            metavar="CIDR",
            help="A reverse proxy's address or network (repeatable): only its X-Forwarded-For "
            "and --user-header are believed.",
        ),
    ] = None,
    user_header: Annotated[
        str | None,
        typer.Option(
            "--user-header",
            metavar="NAME",
            help="Header in which a trusted proxy names the signed-in user (role from the "
            "users file, else viewer).",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="HOST",
            help="Host name served, without port (repeatable; default on loopback: "
            "localhost, 127.0.0.1, ::1); any other Host is refused (400).",
        ),
    ] = None,
    insecure_open: Annotated[
        bool,
        typer.Option(
            "--insecure-open", help="Allow a non-loopback --host with no identity configured."
        ),
    ] = False,
    hide_payloads: Annotated[
        bool, typer.Option("--hide-payloads", help="Show payloads as their sizes only.")
    ] = False,
    session_ttl: Annotated[
        str,
        typer.Option("--session-ttl", metavar="DURATION", help="How long a sign-in lasts."),
    ] = "8h",
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="DURATION",
            help="Longest a page's query may run before the server stops it (e.g. 5s).",
        ),
    ] = None,
) -> None:
    """Serve the operator console: timers, dead letters, nodes, due load, the audit.
    Read-only and open to this machine unless identities are configured."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        import uvicorn

        from flowsched.console import app as console_app
        from flowsched.console.application import LOOPBACK_HOSTS
        from flowsched.console.identity import exposed
    except ImportError as exc:
        fail(f"flowsched console needs its extra: pip install 'flowsched[console]' ({exc.name})")
    from flowsched.durations import parse_duration

    try:
        ttl = parse_duration(session_ttl, "--session-ttl")
    except ValueError as exc:
        fail(f"--session-ttl {session_ttl!r}: {exc}")
    identities = bool(users_file or token_file or user_header)
    if not _loopback(host) and not identities and not insecure_open:
        fail(
            f"--host {host} is reachable from other machines and no identity is configured: "
            "give --users-file, --token-file or --trusted-proxy with --user-header "
            "(or --insecure-open to serve everything to anyone who reaches the port)"
        )
    hosts = list(allowed_host or [])
    if not hosts and _loopback(host):
        hosts = list(LOOPBACK_HOSTS)
    postgres = _postgres(None if config is None else str(config), uri, table)
    if postgres is not None:
        _serve_postgres(postgres, host, port, identities, timeout, dict(
            token_file=token_file, users_file=users_file, trusted_proxies=trusted_proxy or (),
            user_header=user_header, allowed_hosts=hosts or None, hide_payloads=hide_payloads,
            session_ttl=ttl,
        ))  # fmt: skip
        return
    if table is not None:
        fail("--table names a PostgreSQL table: give a postgresql:// --uri")
    # The timers verbs' connection: options over --config (or FLOWSCHED_CONFIG) over defaults.
    target = Connection(config, uri, database, collection, timeout).target()  # exits 2 if bad
    for what, path in (("users", users_file), ("token", token_file)):
        try:
            if path is not None and exposed(path):
                typer.echo(f"warning: the {what} file {path} can be read by other users: "
                           f"chmod 600 {path}", err=True)  # fmt: skip
        except OSError:
            pass  # a missing file is reported by app() below
    try:
        application = console_app(
            target.uri,
            database=target.db,
            collection=target.collection,
            token_file=token_file,
            users_file=users_file,
            trusted_proxies=trusted_proxy or (),
            user_header=user_header,
            allowed_hosts=hosts or None,
            hide_payloads=hide_payloads,
            session_ttl=ttl,
            query_budget_ms=max(1, int(target.timeout.total_seconds() * 1000)),
        )
    except (OSError, ValueError) as exc:
        fail(str(exc))
    mode = "sign-in needed" if identities else "read-only, open"
    typer.echo(
        f"flowsched console on http://{host}:{port}/ for {redact(target.uri)} "
        f"{target.namespace} ({mode})"
    )
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # The console logs each request (path, never the query string) itself, and reads
    # X-Forwarded-For from --trusted-proxy only: uvicorn's own proxy headers stay off.
    uvicorn.run(application, host=host, port=port, log_level="info", access_log=False,
                proxy_headers=False)  # fmt: skip


def _postgres(config: str | None, uri: str | None, table: str | None) -> tuple[str, str] | None:
    """``(url, table)`` when ``--uri`` is a ``postgresql://`` URI, or no ``--uri`` and the
    config file has an ``ipf-scheduler.postgres`` block (``--table`` wins); else ``None``."""
    from flowsched.cli.timers_postgres import DEFAULT_TABLE
    from flowsched.cli.timers_target import take_target

    args = [f"--uri={uri}"] if uri is not None else []
    args += [f"--config={config}"] if config is not None else []
    args += [f"--table={table}"] if table is not None else []
    found = take_target(args)
    if found is None:
        return None
    url, chosen, _ = found
    return url, chosen or DEFAULT_TABLE


def _serve_postgres(
    postgres: tuple[str, str],
    host: str,
    port: int,
    identities: bool,
    timeout: str | None,
    options: dict[str, Any],
) -> None:
    """Serve the console over a PostgreSQL table (exit 2 when it cannot be reached)."""
    import uvicorn

    from flowsched.console import app as console_app
    from flowsched.durations import parse_duration
    from flowsched.errors import SchedulerUnavailable

    url, table = postgres
    try:
        budget = parse_duration(timeout, "--timeout") if timeout else None
    except ValueError as exc:
        fail(f"--timeout {timeout!r}: {exc}")
    budget_ms = 5000 if budget is None else max(1, int(budget.total_seconds() * 1000))
    try:
        application = console_app(url, table=table, query_budget_ms=budget_ms, **options)
    except (OSError, ValueError, ImportError, SchedulerUnavailable) as exc:
        fail(str(exc))
    mode = "sign-in needed" if identities else "read-only, open"
    typer.echo(f"flowsched console on http://{host}:{port}/ for {redact(url)} table {table} "
               f"({mode})")  # fmt: skip
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    uvicorn.run(application, host=host, port=port, log_level="info", access_log=False,
                proxy_headers=False)  # fmt: skip
