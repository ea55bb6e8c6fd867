"""Where a woken timer's lateness goes, for ``postgres_wakeup.py --trace``.

:func:`install` (in the firing node) stamps every ``claim_due``, ``confirm_start``,
``next_due`` and ``settle`` of both PostgreSQL stores, sent (``>``) and answered (``<``), with
``time.time()``; the handler stamps its start. :func:`split` then cuts each timer's lateness
(due time to handler start) into:

* ``wake``: due time to the claim that found it being sent (the node's sleep ending, and the
  hand-off to the thread that makes the call);
* ``claim``: that claim's round trip;
* ``to_confirm``: its answer to the confirm being sent (a hand-off);
* ``confirm``: the confirm's round trip (the check before the start);
* ``to_handler``: its answer to the handler's start (a hand-off).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

Mark = tuple[float, str, str]
PARTS = ("wake", "claim", "to_confirm", "confirm", "to_handler")


def install() -> list[Mark]:
    """Stamp the store calls of this process; the list the stamps go to."""
    from flowsched.postgres.async_store import AsyncPostgresTimerStore
    from flowsched.postgres.store import PostgresTimerStore

    marks: list[Mark] = []
    for name in ("claim_due", "confirm_start", "next_due", "settle"):
        plain = getattr(PostgresTimerStore, name)
        setattr(PostgresTimerStore, name, _stamped(plain, name, marks))
        awaited = getattr(AsyncPostgresTimerStore, name)
        setattr(AsyncPostgresTimerStore, name, _stamped_async(awaited, name, marks))
    return marks


def _count(result: object) -> str:
    return str(len(result)) if isinstance(result, list) else str(result)


def _stamped(method: Any, name: str, marks: list[Mark]) -> Any:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        marks.append((time.time(), f"{name}>", ""))
        result = method(self, *args, **kwargs)
        marks.append((time.time(), f"{name}<", _count(result)))
        return result

    return call


def _stamped_async(method: Any, name: str, marks: list[Mark]) -> Any:
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        marks.append((time.time(), f"{name}>", ""))
        result = await method(self, *args, **kwargs)
        marks.append((time.time(), f"{name}<", _count(result)))
        return result

    return call


def _parts(marks: list[Mark], item: str, late_ms: float, due: float) -> dict[str, float] | None:
    start = next((t for t, what, extra in marks if what == "handler" and extra == item), None)
    if start is None:
        return None
    near = [m for m in marks if due - 0.05 <= m[0] <= start]
    found = [t for t, what, extra in near if what == "claim_due<" and extra not in ("0", "")]
    if not found:
        return None
    answered = found[-1]
    sent = max((t for t, what, _ in near if what == "claim_due>" and t <= answered), default=None)
    confirms = [t for t, what, _ in near if what == "confirm_start>" and t >= answered]
    confirmed = [t for t, what, _ in near if what == "confirm_start<" and t >= answered]
    if sent is None or not confirms or not confirmed:
        return None
    return {
        "wake": 1000 * (sent - due),
        "claim": 1000 * (answered - sent),
        "to_confirm": 1000 * (confirms[0] - answered),
        "confirm": 1000 * (confirmed[0] - confirms[0]),
        "to_handler": 1000 * (start - confirmed[0]),
    }


def split(log: str, late_ms: dict[str, float]) -> dict[str, dict[str, float]]:
    """Each part's p50, p90 and max over the timers of one run (ms), from ``log.trace``."""
    marks: list[Mark] = [tuple(m) for m in json.loads(Path(f"{log}.trace").read_text())]
    handler_at = {extra: t for t, what, extra in marks if what == "handler"}
    cut = []
    for item, late in late_ms.items():
        if item in handler_at:
            due = handler_at[item] - late / 1000
            parts = _parts(marks, item, late, due)
            if parts is not None:
                cut.append(parts)
    out: dict[str, dict[str, float]] = {}
    for part in PARTS:
        values = sorted(c[part] for c in cut)
        if values:
            out[part] = {
                "p50": round(statistics.median(values), 2),
                "p90": round(values[int(0.9 * (len(values) - 1))], 2),
                "max": round(values[-1], 2),
            }
    return out


def describe(run: dict[str, Any]) -> str:
    """A run's parts, p50/p90 in ms, on one line (empty without ``--trace``)."""
    parts = run.get("parts_ms") or {}
    return "  ".join(f"{p} {v['p50']:.1f}/{v['p90']:.1f}" for p, v in parts.items())
