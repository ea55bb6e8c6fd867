"""Internal: the time a port call has left, for the store calls it makes (CONTRACT section
15: a call gives up after ``op_timeout``).

A node scheduler's write may make several store calls - a measurement of the store's clock,
the write, a cancel's retry after a lost reply (:mod:`flowsched.node.write_fence`) - and all
of them together end within the call's ``op_timeout``: the node opens a budget
(:func:`call_budget`) and a store that gives up by time (the PostgreSQL stores,
:mod:`flowsched.postgres.time_limit`) gives up by the budget's end when it comes first
(:func:`budget_left`). The budget lives in a :class:`~contextvars.ContextVar`, so it follows
the calling thread or asyncio task and nothing else; it is counted on
:func:`time.monotonic`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["budget_left", "call_budget", "port_call"]

_END: ContextVar[float | None] = ContextVar("flowsched_call_end", default=None)
_CALL: ContextVar[str | None] = ContextVar("flowsched_port_call", default=None)


@contextmanager
def call_budget(began: float, seconds: float | None, call: str | None = None) -> Iterator[None]:
    """The store calls in this block end by ``began + seconds`` (``time.monotonic()``; an
    enclosing budget that ends sooner still holds); ``None``: no budget of its own. They
    are made for the port call ``call`` (``"schedule('t')"``: a store names it when it
    gives up, :func:`port_call`)."""
    named = _CALL.set(call) if call is not None else None
    try:
        if seconds is None:
            yield
            return
        outer = _END.get()
        end = began + seconds
        token = _END.set(end if outer is None else min(outer, end))
        try:
            yield
        finally:
            _END.reset(token)
    finally:
        if named is not None:
            _CALL.reset(named)


def port_call() -> str | None:
    """The port call the store calls in progress are made for (``None``: not told)."""
    return _CALL.get()


def budget_left() -> float | None:
    """Seconds left of the enclosing call's budget (may be 0 or less), or ``None``."""
    end = _END.get()
    return None if end is None else end - time.monotonic()
