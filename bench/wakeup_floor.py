"""The floor of a wake-up, for ``postgres_wakeup.py --floor``: what this host allows at the
moment of the run, with flowsched out of the way.

One thread, raw psycopg 3, on the scheduler's own table: LISTEN on its channel; on each
notification read the soonest due time; sleep until it (woken early by the next
notification); then one claim statement (``UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING``,
judged by the server's ``statement_timestamp()``, as the adapter's), the handler for each row,
and one ``DELETE``. No check before the start, no history, no thread hand-offs: one round
trip between the due time and the handler, where the adapter has two and its hand-offs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql


def run(
    url: str,
    table: str,
    channel: str,
    stop: threading.Event,
    fired: Callable[[str, float], None],
    ready: Callable[[], None],
) -> None:
    """Fire ``table``'s timers until ``stop``; ``fired(id, due_epoch_seconds)`` at each start,
    ``ready()`` once listening."""
    t = sql.Identifier(table)
    soonest = sql.SQL(
        "SELECT extract(epoch FROM min(due))::float8 FROM {} WHERE owner IS NULL"
    ).format(t)
    claim = sql.SQL(
        "UPDATE {t} SET owner = 'floor', lease_until = statement_timestamp() + interval '30 s' "
        "WHERE id IN (SELECT id FROM {t} WHERE owner IS NULL AND due <= statement_timestamp() "
        "ORDER BY due LIMIT 100 FOR UPDATE SKIP LOCKED) "
        "RETURNING id, extract(epoch FROM due)::float8"
    ).format(t=t)
    delete = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(t)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        ready()
        due: float | None = None
        while not stop.is_set():
            wait = 0.5 if due is None else max(0.0, min(0.5, due - time.time()))
            heard = list(conn.notifies(timeout=wait, stop_after=1)) if wait > 0 else []
            if heard or due is None:
                row: Any = conn.execute(soonest).fetchone()
                due = row[0] if row else None
            if due is not None and time.time() >= due:
                rows = conn.execute(claim).fetchall()
                for item, item_due in rows:
                    fired(item, item_due)
                if rows:
                    conn.execute(delete, ([r[0] for r in rows],))
                row = conn.execute(soonest).fetchone()
                due = row[0] if row else None


def firing_node(url: str, table: str, channel: str, log: str) -> None:
    """The floor as a process: one line ``id lateness_ms`` per start in ``log``, until SIGTERM."""
    import signal

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def fired(item: str, due: float) -> None:
        os.write(fd, f"{item} {1000 * (time.time() - due):.3f}\n".encode())

    run(url, table, channel, stop, fired, lambda: print("ready", flush=True))
