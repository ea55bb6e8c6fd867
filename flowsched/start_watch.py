"""Internal: the warning for a real-clock scheduler that holds due timers but was never started.

A real-clock scheduler fires nothing before ``start()``. That must never be silent, and
watching for it must cost nothing on ``schedule()``: each adapter arms a :class:`StartWatch`
once, at its first item before ``start()``, and stops it at ``start()`` or ``close()``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["NOT_STARTED", "StartWatch"]

log = logging.getLogger("flowsched.delivery")

NOT_STARTED = datetime.max.replace(tzinfo=UTC)
"""The in-memory scheduler's ``_sleep_until`` while never started on a real clock: later than
any due time, so the first ``schedule()`` "wakes the timer" (the test it makes anyway), and
that first wake arms the watch."""

_LONGEST_PAUSE = 60.0


class Startable(Protocol):
    """What a :class:`StartWatch` asks of a scheduler."""

    def now(self) -> datetime: ...

    def _unstarted_head(self) -> tuple[bool, datetime | None]:
        """(still never started, the earliest due time of an item it would deliver)."""
        ...


class StartWatch:
    """Logs one warning if a scheduler holds an item due for longer than ``grace`` while it
    was never started.

    The watch runs on a daemon thread that holds the scheduler weakly and ends at the warning,
    at :meth:`stop` (``start()``, ``close()``), or when the scheduler is garbage."""

    def __init__(self) -> None:
        self._stop: threading.Event | None = None
        self._lock = threading.Lock()

    def arm(self, scheduler: Startable, grace: timedelta) -> None:
        """Start watching ``scheduler`` (once; later calls do nothing)."""
        with self._lock:
            if self._stop is not None:
                return
            self._stop = stop = threading.Event()
        name = type(scheduler).__name__
        thread = threading.Thread(
            target=_watch,
            args=(weakref.ref(scheduler), name, grace, stop),
            name=f"flowsched-{name}-start-watch",
            daemon=True,
        )
        thread.start()

    def stop(self) -> None:
        """End the watch (the scheduler was started or closed)."""
        with self._lock:
            if self._stop is None:
                self._stop = threading.Event()  # never armed: it never will be
            self._stop.set()


def _watch(ref: weakref.ref[Startable], name: str, grace: timedelta, stop: threading.Event) -> None:
    while True:
        found = ref()
        if found is None:
            return
        pause = grace
        try:
            waiting, head = found._unstarted_head()
            now = found.now()
        except Exception as exc:  # e.g. the database is down: not this watch's business
            log.debug("%s start watch: %s", name, exc)
            waiting, head = True, None
        del found
        if not waiting:
            return
        if head is not None:
            if head + grace <= now:
                log.warning(
                    "%s holds timers due since %s but was never started: nothing fires "
                    "until you call start() (or use `with %s(...) as scheduler:`). "
                    "Schedulers on a ManualClock need no start().",
                    name,
                    head.isoformat(),
                    name,
                )
                return
            pause = max(head + grace - now, grace / 10)
        if stop.wait(min(pause.total_seconds(), _LONGEST_PAUSE)):
            return
