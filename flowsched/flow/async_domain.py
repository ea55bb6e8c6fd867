"""Internal: ``AsyncFlowDomain``, the flow domain for asyncio services.

Built with ``FlowDomain.builder()...build_async()`` on an asyncio scheduler
(:class:`~flowsched.async_port.AsyncSchedulerPort`). It makes the same decisions as
:class:`~flowsched.flow.domain.FlowDomain` - they are
:class:`~flowsched.flow.domain_base.DomainBase`'s, written once - and applies them in the
same order (schedule, store, cancel; then listeners, then actions), awaiting the port's
calls. Action adapters may be ``async def`` (awaited on the loop) or plain functions (run
in a worker thread, so that a blocking client never stalls the loop).

The flow store may be synchronous (:class:`~flowsched.InMemoryFlowStore`: its calls do no
I/O) or asynchronous (``load``/``insert``/``update`` coroutines, as an async MongoDB store
would have): whatever a store call returns is awaited when it is awaitable.

One instance is decided at a time (an :class:`asyncio.Lock` per instance, dropped when
nobody holds or waits for it), different instances concurrently.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from flowsched.async_port import AsyncSchedulerPort
from flowsched.callables import is_async_callable
from flowsched.errors import ConcurrentUpdateError
from flowsched.flow.decision import Decision
from flowsched.flow.domain_base import Decide, DomainBase, decided
from flowsched.flow.events import ActionRequest
from flowsched.flow.instance import FlowInstance
from flowsched.records import ScheduleItem

__all__ = ["AsyncFlowDomain"]

T = TypeVar("T")


class AsyncFlowDomain(DomainBase):
    """Runs the registered flows on an asyncio scheduler: ``await domain.start(...)``,
    ``await domain.handle(...)``, ``await domain.instance(...)``.

    >>> import asyncio
    >>> from datetime import UTC, datetime, timedelta
    >>> from flowsched import AsyncInMemoryScheduler, Flow, FlowDomain, ManualClock
    >>> from flowsched import ActionTimeoutEvent, SchedulingConfig
    >>> flow = (Flow("Payment").initial("Checking", invokes=["Check"]).terminal("TimedOut")
    ...     .on(ActionTimeoutEvent, in_state="Checking", action="Check", go_to="TimedOut"))
    >>> async def check(request):  # an async def action adapter
    ...     return None
    >>> async def main() -> None:
    ...     clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    ...     async with AsyncInMemoryScheduler(clock=clock) as scheduler:
    ...         domain = (FlowDomain.builder()
    ...             .with_config(SchedulingConfig.from_string(
    ...                 "Payment.Checking.Check.timeout-duration = 5s"))
    ...             .with_scheduler_adapter(scheduler).with_clock(clock).with_flow(flow)
    ...             .with_action_adapter("Check", check).build_async())
    ...         await domain.start("Payment", "p-1")
    ...         await clock.advance_async(timedelta(seconds=5))
    ...         print((await domain.instance("p-1")).state)
    >>> asyncio.run(main())
    TimedOut
    """

    scheduler: AsyncSchedulerPort
    store: Any

    def __init__(self, **parts: Any) -> None:
        """Use ``FlowDomain.builder()...build_async()``; this wires checked parts together
        (the keywords of :class:`~flowsched.flow.domain_base.DomainBase`)."""
        super().__init__(**parts)
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._awaited = {key: is_async_callable(a) for key, a in self._adapters.items()}
        self._register_on(self.scheduler, self._on_timer)

    # -- what users call -----------------------------------------------------------------

    async def start(
        self,
        flow: str,
        flow_id: str,
        *,
        offsets: Mapping[str, datetime] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> FlowInstance:
        """As :meth:`FlowDomain.start`: start instance ``flow_id`` of ``flow``."""
        return decided(await self._run(flow_id, self._starting(flow, flow_id, offsets, data)))

    async def handle(
        self, flow_id: str, event: object, offsets: Mapping[str, datetime] | None = None
    ) -> FlowInstance:
        """As :meth:`FlowDomain.handle`: deliver ``event`` to instance ``flow_id``."""
        return decided(await self._run(flow_id, self._handling(flow_id, event, offsets)))

    async def instance(self, flow_id: str) -> FlowInstance | None:
        """The stored instance, or ``None``."""
        loaded: FlowInstance | None = await _maybe(self.store.load(flow_id))
        return loaded

    async def timers(self, flow_id: str) -> list[ScheduleItem]:
        """As :meth:`FlowDomain.timers`: what the instance waits on, earliest first."""
        ids = self._timer_ids(await self.instance(flow_id))
        items = [item for item in [await self.scheduler.get(i) for i in ids] if item]
        return sorted(items, key=lambda item: item.due)

    # -- timer handler (awaited on the scheduler's loop) ---------------------------------

    async def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        decide = self._timer_decision(item, attempt)
        if decide is not None and item.flow_id is not None:
            await self._run(item.flow_id, decide)

    # -- applying a step -------------------------------------------------------------------

    async def _run(self, flow_id: str, decide: Decide) -> FlowInstance | None:
        for _ in range(self._conflict_retries):
            lock = self._hold(flow_id)
            try:
                async with lock:
                    loaded = await _maybe(self.store.load(flow_id))
                    step = decide(loaded, self.scheduler.now())
                    if step is None:
                        return None
                    try:
                        saved = await self._apply(step)
                    except ConcurrentUpdateError as exc:
                        self._conflict(flow_id, exc)
                        continue
            finally:
                self._release(flow_id)
            await self._after(step)
            return saved
        raise self._gave_up(flow_id)

    async def _apply(self, step: Decision) -> FlowInstance:
        """Schedule, store, cancel — in that order (see :mod:`flowsched.flow.decision`)."""
        self._check_started(self.scheduler, step)
        for item in step.schedules:
            await self.scheduler.schedule(item)
        saved: FlowInstance = step.instance
        if step.changed:
            if step.instance.version == 0:
                saved = await _maybe(self.store.insert(step.instance))
            else:
                saved = await _maybe(self.store.update(step.instance))
        if step.cancel_flow:
            await self.scheduler.cancel_flow(step.instance.flow_id)
        else:
            for item_id in step.cancellations():
                await self.scheduler.cancel(item_id)
        return saved

    async def _after(self, step: Decision) -> None:
        """Outside the lock: tell listeners, invoke actions, feed back their responses."""
        self._tell_all(step)
        for request in step.invocations:
            response = await self._invoke(request)
            if response is not None:
                await self.handle(request.flow_id, response)

    async def _invoke(self, request: ActionRequest) -> object:
        adapter = self._adapter(request)
        if adapter is None:
            return None
        awaited = self._awaited.get((request.flow, request.action))
        if awaited is None:
            awaited = self._awaited.get((None, request.action), False)
        try:
            if awaited:
                response = adapter(request)
            else:
                loop = asyncio.get_running_loop()
                call = functools.partial(contextvars.copy_context().run, adapter, request)
                response = await loop.run_in_executor(None, call)
            return await _maybe(response)
        except Exception:
            self._adapter_failed(request)
            return None

    # -- per-instance locks ----------------------------------------------------------------

    def _hold(self, flow_id: str) -> asyncio.Lock:
        lock, users = self._locks.get(flow_id) or (asyncio.Lock(), 0)
        self._locks[flow_id] = (lock, users + 1)
        return lock

    def _release(self, flow_id: str) -> None:
        lock, users = self._locks[flow_id]
        if users == 1:
            del self._locks[flow_id]
        else:
            self._locks[flow_id] = (lock, users - 1)


async def _maybe(value: Any) -> Any:
    """``value``, awaited first if it is awaitable (a sync or an async store's answer)."""
    if inspect.isawaitable(value):
        return await value
    return value
