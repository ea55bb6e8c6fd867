"""Internal: the thread driver — a loop thread that makes the store calls and a pool of
handler threads; :meth:`ThreadDriver.run_inline` drives the same core on the caller's
thread (``run_due``, :class:`~flowsched.ManualClock`).

It waits on one condition variable: until the core's next time, a wake-up, a handler
ending or a store call answering. The core is only touched under that condition's lock;
store calls run outside it, on a small pool (one thread per lane of the core: a claim may be
on its way while a confirm or a settle is), handlers on theirs. Inline, calls go one at a
time on the caller's thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from flowsched.drivers.base import DriverBase
from flowsched.drivers.workers import HandlerThreads, interpreter_exiting
from flowsched.node.actions import Action, Sleep, StartHandler
from flowsched.node.core import store_call
from flowsched.outcomes import Outcome
from flowsched.store.interface import TimerStore
from flowsched.store.records import Claim, Settlement, SettleResult

__all__ = ["ThreadDriver"]

LANES = 3  # the core's lanes of store calls (flowsched.node.actions.lane)

log = logging.getLogger("flowsched.node")

RunHandler = Callable[[Claim], Outcome]


class ThreadDriver(DriverBase[TimerStore, RunHandler]):
    """Runs ``core`` over ``store``; ``run_handler(claim)`` makes one delivery."""

    def _prepare(self) -> None:
        """The condition it waits on, its loop thread, its pools."""
        self.cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pool: HandlerThreads | None = None
        self._io: ThreadPoolExecutor | None = None  # the store calls, one thread per lane
        self._inline = threading.local()
        # Handlers that ended, for the core (read under the condition's lock: _take_ended).
        self._ended: deque[tuple[int, Outcome, SettleResult | None]] = deque()
        self._told = False  # the loop was notified of what _ended holds and has not taken it

    # -- waking --------------------------------------------------------------------

    def wake(self) -> None:
        with self.cond:
            self.core.wake()
            self.cond.notify_all()

    def wake_at(self, when: datetime) -> None:
        """An item is due at ``when``: look again once it can be claimed."""
        when = self.claimable(when)
        with self.cond:
            before = self.core.look_at
            self.core.wake_at(when)
            if self.core.look_at is not before:  # earlier than the loop sleeps until
                self.cond.notify_all()

    # -- background ----------------------------------------------------------------

    def start(self, name: str) -> None:
        with self.cond:
            if self._thread is not None:
                return
            workers = self.core.settings.workers
            self._pool = HandlerThreads(workers, f"{name}-handler")
            self._pool.prestart()  # the first burst's handlers start without a thread start
            self._io = ThreadPoolExecutor(LANES, thread_name_prefix=f"{name}-store")
            self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        cond = self.cond
        while True:
            with cond:
                self._take_ended()
                action = self.core.next_action(self.now())
                if isinstance(action, Sleep):
                    if self.core.closing and action.idle:
                        if self._pool is not None:
                            self._pool.shutdown()
                        if self._io is not None:
                            self._io.shutdown(wait=False)
                        return
                    cond.wait(self._timeout(action))
                    continue
                try:
                    if isinstance(action, StartHandler):
                        assert self._pool is not None
                        self._start_all(action, self._pool)
                        continue
                    assert self._io is not None
                    # Off the loop: the other lanes go on (the core keeps one call per lane).
                    self._io.submit(self._perform, action)
                except RuntimeError:  # pools shut down: the interpreter exits, never closed
                    if not interpreter_exiting():
                        raise
                    who = threading.current_thread().name
                    log.warning("%s: the interpreter exits, never closed: stops firing", who)
                    return

    def _start_all(self, action: StartHandler, pool: HandlerThreads) -> None:
        """Hand ``action`` and every start the core holds after it (a claim's batch) to the
        handler threads, in one hold of the lock: the handlers that end meanwhile are told
        to the loop once (``_told``), not once for each start."""
        core, run, submit = self.core, self._run, pool.submit
        submit(run, action)
        starting, now = core.starting, self.now()
        while starting:
            more = core.next_action(now)  # a start: the core gives those first, at any now
            assert isinstance(more, StartHandler)
            submit(run, more)

    def _run(self, action: StartHandler) -> None:
        local = self._inline
        outer = getattr(local, "handling", None)
        local.handling = action.ticket  # a close from the handler waits for the others only
        try:
            outcome = self.run_handler(action.claim)
        except BaseException:  # an interrupt, an exit: the claim is given back, uncounted
            with self.cond:
                self.core.abandoned(action.ticket)
                self.cond.notify_all()
            with contextlib.suppress(Exception):  # else it lapses (delivered again then)
                self.store.release([action.claim])
            raise
        finally:
            local.handling = outer
        settled = None
        if self.settle_here:
            try:
                [settled] = self.store.settle([Settlement.of(action.claim, outcome)])
            except Exception:  # owed to the store as usual: the loop retries it
                settled = None
        # One append per handler; the lock and a notify only when the loop was not told yet
        # (ended handlers reach the core in runs, on the loop's next pass).
        self._ended.append((action.ticket, outcome, settled))
        if not self._told:
            with self.cond:
                self._told = True
                self.cond.notify_all()

    def _take_ended(self) -> None:
        """Give the core the handlers that ended (under the condition's lock). Every
        ``_run`` either appended before ``_told`` was cleared here (taken now) or sees it
        clear and notifies: none waits unseen."""
        self._told = False
        ended, finished = self._ended, self.core.finished
        while ended:
            ticket, outcome, settled = ended.popleft()
            finished(ticket, outcome, settled=settled)

    def _perform(self, action: Action) -> None:
        sent = self.now()
        try:
            result = store_call(action, self.store, self.core.settings, self.routes())
        except Exception as exc:
            with self.cond:
                self._take_ended()  # handlers that ended first are the core's before this
                self.core.outage.sent(sent)  # an outage is as long as from then
                self.core.failed(action, exc, self.now())
                self.cond.notify_all()
            return
        with self.cond:
            self._take_ended()  # e.g. a renewal answered after its handler's settle
            self.core.succeeded(action, result, self.now())
            self.cond.notify_all()

    # -- inline --------------------------------------------------------------------

    def run_inline(self) -> int:
        """Drive the core on this thread until it sleeps; return how many handlers ran.
        Called again from a handler it runs, it returns 0 (the running loop goes on)."""
        if getattr(self._inline, "active", False):
            return 0
        self._inline.active = True
        ran = 0
        try:
            with self.cond:
                self.core.wake()
            while True:
                with self.cond:
                    self._take_ended()
                    action = self.core.next_action(self.now())
                if isinstance(action, Sleep):
                    return ran
                if isinstance(action, StartHandler):
                    self._run(action)
                    ran += 1
                    continue
                self._perform(action)
        finally:
            self._inline.active = False

    # -- closing -------------------------------------------------------------------

    def close(self) -> None:
        """Stop claiming, release queued claims, wait for handlers (at most
        ``shutdown_timeout``; those left running are logged and their claims lapse)."""
        with self.cond:
            self.core.close()
            self.cond.notify_all()
            thread, pool = self._thread, self._pool
        if thread is None:
            if not getattr(self._inline, "active", False):
                self._await_inline()  # handlers run inline on other threads
            self.run_inline()
            return
        own = getattr(self._inline, "handling", None)
        if own is not None:  # a handler closing its own scheduler: the loop ends once it returns
            self._await_others(own)
            return
        if thread is not threading.current_thread():
            thread.join(self.shutdown_timeout.total_seconds())
            if thread.is_alive():
                with self.cond:
                    self._take_ended()
                    left = [claim.item.key for claim in self.core.running.values()]
                    owed = len(self.core.pending)
                log.warning(
                    "node %s closed after %ss with handlers still running: %s, and %d "
                    "outcomes not written (their claims lapse and they are delivered again)",
                    self.core.settings.owner,
                    self.shutdown_timeout.total_seconds(),
                    ", ".join(left) or "none",
                    owed,
                )
        if pool is not None:
            pool.shutdown()

    def _await_others(self, own: int) -> None:
        """From the handler of ticket ``own``: wait (at most ``shutdown_timeout``) for the
        other handlers running, whose outcomes the loop then writes."""
        deadline = self.clock.monotonic() + self.shutdown_timeout.total_seconds()
        with self.cond:
            while True:
                self._take_ended()
                self.cond.notify_all()  # the loop writes what ended
                others = [c.item.key for t, c in self.core.running.items() if t != own]
                left = deadline - self.clock.monotonic()
                if not others or left <= 0:
                    break
                self.cond.wait(left)
        if others:
            log.warning(
                "node %s closed after %ss with handlers still running: %s",
                self.core.settings.owner,
                self.shutdown_timeout.total_seconds(),
                ", ".join(others),
            )

    def _await_inline(self) -> None:
        """Wait (at most ``shutdown_timeout``) for the handlers other threads run inline."""
        deadline = self.clock.monotonic() + self.shutdown_timeout.total_seconds()
        with self.cond:
            while self._ended or self.core.running or self.core.starting:
                self._take_ended()
                if not (self.core.running or self.core.starting):
                    return
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    left_running = [claim.item.key for claim in self.core.running.values()]
                    log.warning(
                        "node %s closed after %ss with handlers still running: %s",
                        self.core.settings.owner,
                        self.shutdown_timeout.total_seconds(),
                        ", ".join(left_running),
                    )
                    return
                self.cond.wait(left)
