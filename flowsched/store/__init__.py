"""Timer storage behind one typed interface (CONTRACT section 15).

:class:`TimerStore` (synchronous) and :class:`AsyncTimerStore` (its coroutine twin, same
names and meanings) are what a node core's drivers and the scheduler port call; every result
is one of the typed records here or of :mod:`flowsched.steering` — no ``Any`` from a
database. :class:`MemoryTimerStore` is the reference implementation;
:func:`flowsched.testing.check_timer_store` is the conformance suite every store passes.

Glossary: a *claim* is a node's hold on one due item; its *lease* is how long the hold lasts
(by the store's clock); the *generation* numbers the forms of one id (a replacement gets a
greater one); the *fence* is what a write must match to apply — ``(id, generation, owner,
token)`` for a claim's writes (and a live stored lease for a confirm or renewal; see
:class:`Claim`), ``generation`` or a ``deadline`` for a cancel;
*settlement* is the batched write of what came of claims (:class:`Settlement`).
"""

from flowsched.store.async_face import as_async
from flowsched.store.interface import AsyncTimerStore, TimerStore
from flowsched.store.memory import MemoryTimerStore
from flowsched.store.paging import decode_cursor, encode_cursor, page_of
from flowsched.store.records import (
    Claim,
    QuarantinedRecord,
    Settlement,
    SettleResult,
    TimerSelection,
)

__all__ = [
    "AsyncTimerStore",
    "Claim",
    "MemoryTimerStore",
    "QuarantinedRecord",
    "SettleResult",
    "Settlement",
    "TimerSelection",
    "TimerStore",
    "as_async",
    "decode_cursor",
    "encode_cursor",
    "page_of",
]
