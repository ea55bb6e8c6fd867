"""Internal: ``FlowDomain.builder()`` — wires configuration, a scheduler adapter and flows.

::

    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_file("config/application.conf"))
        .with_scheduler_adapter(scheduler)            # any SchedulerPort
        .with_flow(credit_transfer)
        .with_action_adapter("CheckFraud", fraud_service.check)
        .build()
    )

``build()`` checks that every action of every flow has an adapter and that every
configuration key names a registered flow, state and action (near-misses suggested); it
raises :class:`FlowConfigError` unless ``with_options(config_check="warn")``.

The builder serves both faces: ``build()`` gives a :class:`FlowDomain` on a synchronous
scheduler (and refuses ``async def`` action adapters, which it could never await);
``build_async()`` gives an :class:`~flowsched.flow.async_domain.AsyncFlowDomain` on an
asyncio scheduler, whose adapters may be ``async def`` or plain.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any, Literal, Self

from flowsched.async_port import AsyncSchedulerPort
from flowsched.callables import is_async_callable, short_callable
from flowsched.clock import Clock, SystemClock
from flowsched.config import SchedulingConfig
from flowsched.config.suggest import closest
from flowsched.errors import FlowConfigError, FlowDefinitionError
from flowsched.flow.check import config_problems
from flowsched.flow.definition import Flow, FlowDefinition
from flowsched.flow.domain import ActionAdapter, FlowDomain
from flowsched.flow.planner import Planner
from flowsched.flow.store import AsyncFlowStore, FlowStore, InMemoryFlowStore, async_store_calls
from flowsched.flow.timeline import Listener
from flowsched.port import SchedulerPort

if TYPE_CHECKING:
    from flowsched.flow.async_domain import AsyncFlowDomain

__all__ = ["FlowConfigError", "FlowDomainBuilder"]

log = logging.getLogger("flowsched.flow")

ConfigCheck = Literal["error", "warn"]


class FlowDomainBuilder:
    """Collects the parts of a :class:`FlowDomain`; every ``with_*`` returns the builder."""

    def __init__(self) -> None:
        self._config: SchedulingConfig | None = None
        self._scheduler: SchedulerPort | AsyncSchedulerPort | None = None
        self._flows: dict[str, FlowDefinition] = {}
        self._adapters: dict[tuple[str | None, str], ActionAdapter] = {}
        self._store: FlowStore | AsyncFlowStore | None = None
        self._clock: Clock = SystemClock()
        self._rng: random.Random | None = None
        self._listeners: list[Listener] = []
        self._config_check: ConfigCheck = "error"
        self._cancel_retries_on_exit = True

    def with_config(self, config: SchedulingConfig) -> Self:
        """The scheduling configuration. Optional: without it the domain runs on
        ``SchedulingConfig.empty()``, the defaults, under which no action has a timeout or
        retries and no state has a processing-time deadline."""
        self._config = config
        return self

    def with_scheduler_adapter(self, scheduler: SchedulerPort | AsyncSchedulerPort) -> Self:
        """The scheduler every timer goes through (``InMemoryScheduler``,
        ``MongoScheduler``, or your own ``SchedulerPort``; for :meth:`build_async` an
        ``AsyncInMemoryScheduler``, ``AsyncMongoScheduler`` or your own
        ``AsyncSchedulerPort``). Required. The domain registers
        one handler per flow on it (``flow:<FlowName>``; other domains with other flows may
        share the scheduler); starting and closing it stays with you."""
        self._scheduler = scheduler
        return self

    def with_flow(self, flow: Flow | FlowDefinition) -> Self:
        """Register a flow (a :class:`Flow` is built here)."""
        definition = flow.build() if isinstance(flow, Flow) else flow
        if definition.name in self._flows:
            raise ValueError(f"flow {definition.name!r} registered twice")
        self._flows[definition.name] = definition
        return self

    def with_action_adapter(
        self, action: str, adapter: ActionAdapter, *, flow: str | None = None
    ) -> Self:
        """Call ``adapter(request)`` whenever ``action`` is invoked (in ``flow`` only, if
        given; a flow-specific adapter wins over a general one). An ``async def`` adapter
        needs :meth:`build_async` (``build()`` refuses it)."""
        if not callable(adapter):
            raise TypeError(
                f"with_action_adapter({action!r}): expected a callable, got {adapter!r}"
            )
        self._adapters[(flow, action)] = adapter
        return self

    def with_flow_store(self, store: FlowStore | AsyncFlowStore) -> Self:
        """Where instances are kept (default: an :class:`InMemoryFlowStore`). Use
        ``flowsched.mongo.flow_store.MongoFlowStore`` to survive restarts. An
        :class:`~flowsched.flow.store.AsyncFlowStore` (coroutine calls) serves
        :meth:`build_async` only."""
        self._store = store
        return self

    def with_clock(self, clock: Clock) -> Self:
        """The clock of this domain's scheduler, given again (default: the system clock).

        Entry times and due dates are read from the scheduler (``scheduler.now()``): on
        MongoDB that is the database's time, this host's skew corrected, so that the timers a
        flow sets agree with the nodes that fire them. Give the scheduler this clock."""
        self._clock = clock
        return self

    def with_random(self, rng: random.Random) -> Self:
        """The random source for retry jitter (seed it for reproducible schedules)."""
        self._rng = rng
        return self

    def with_listener(self, listener: Listener) -> Self:
        """Receive every :class:`~flowsched.flow.timeline.TimelineEntry` (see that module)."""
        self._listeners.append(listener)
        return self

    def with_options(
        self,
        *,
        config_check: ConfigCheck | None = None,
        cancel_retries_on_exit: bool | None = None,
    ) -> Self:
        """``config_check``: ``"error"`` (default) raises :class:`FlowConfigError` at build
        for keys naming unknown flows/states/actions, ``"warn"`` only logs them.
        ``cancel_retries_on_exit``: ``True`` (default) cancels a state's pending retries
        when the flow leaves it; ``False`` keeps IPF's behaviour (they keep firing)."""
        if config_check is not None:
            if config_check not in ("error", "warn"):
                raise ValueError(f"config_check must be 'error' or 'warn' (got {config_check!r})")
            self._config_check = config_check
        if cancel_retries_on_exit is not None:
            self._cancel_retries_on_exit = cancel_retries_on_exit
        return self

    def build(self) -> FlowDomain:
        """Check everything and return the domain (its flows' handlers registered on
        the scheduler; ``ValueError`` if another domain runs one of them there).

        ``TypeError`` for an ``async def`` action adapter or an asyncio scheduler: use
        :meth:`build_async`."""
        parts = self._parts()
        scheduler = parts.pop("scheduler")
        if isinstance(scheduler, AsyncSchedulerPort):
            raise TypeError(
                f"FlowDomain.builder().build(): {scheduler!r} is an asyncio scheduler; "
                "use .build_async() for an AsyncFlowDomain"
            )
        store_calls = async_store_calls(parts["store"])
        if store_calls:
            raise TypeError(
                f"FlowDomain.builder().build(): the flow store {parts['store']!r} has "
                f"coroutine {'/'.join(store_calls)} (async def): a FlowDomain would never "
                "await them and no instance would be kept; use .build_async() for an "
                "AsyncFlowDomain, or a synchronous store"
            )
        refused = sorted(
            f"{action} ({short_callable(adapter)})"
            for (_, action), adapter in self._adapters.items()
            if is_async_callable(adapter)
        )
        if refused:
            raise TypeError(
                f"action adapter(s) {', '.join(refused)} are coroutine functions (async "
                "def): a FlowDomain calls adapters synchronously and would never run them; "
                "build an AsyncFlowDomain with .build_async() on an AsyncInMemoryScheduler "
                "or AsyncMongoScheduler, or pass plain functions"
            )
        return FlowDomain(scheduler=scheduler, **parts)

    def build_async(self) -> AsyncFlowDomain:
        """Check everything and return an
        :class:`~flowsched.flow.async_domain.AsyncFlowDomain` on the asyncio scheduler
        (``TypeError`` for a synchronous one). Action adapters may be ``async def``."""
        from flowsched.flow.async_domain import AsyncFlowDomain

        parts = self._parts()
        scheduler = parts.pop("scheduler")
        if not isinstance(scheduler, AsyncSchedulerPort):
            raise TypeError(
                f"FlowDomain.builder().build_async(): {scheduler!r} is a synchronous "
                "scheduler; give an AsyncInMemoryScheduler or AsyncMongoScheduler, or use "
                ".build()"
            )
        return AsyncFlowDomain(scheduler=scheduler, **parts)

    def _parts(self) -> dict[str, Any]:
        """The checked parts both faces are built of."""
        config = self._config if self._config is not None else SchedulingConfig.empty()
        if self._scheduler is None:
            raise ValueError(
                "FlowDomain.builder(): call .with_scheduler_adapter(scheduler) first "
                "(an InMemoryScheduler, a MongoScheduler or another SchedulerPort)"
            )
        if not self._flows:
            raise ValueError("FlowDomain.builder(): register at least one flow with .with_flow()")
        self._check_adapters()
        self._check_config(config)
        planner = Planner(
            config,
            self._rng if self._rng is not None else random.Random(),
            cancel_retries_on_exit=self._cancel_retries_on_exit,
        )
        return {
            "flows": self._flows,
            "scheduler": self._scheduler,
            "store": self._store if self._store is not None else InMemoryFlowStore(),
            "planner": planner,
            "clock": self._clock,
            "adapters": self._adapters,
            "listeners": self._listeners,
        }

    def _check_adapters(self) -> None:
        """Every action of every flow has an adapter, and every adapter serves an action of a
        registered flow: an adapter under a misspelt action (``CheckFruad``) or a flow that is
        not registered is a :class:`FlowDefinitionError` naming it and, when one is close, the
        action meant. (An adapter nobody can call is never right; a service that runs some of
        its flows in each of several domains gives each domain the adapters of its flows.)"""
        flows = self._flows
        missing = sorted(
            f"{d.name}.{action}"
            for d in flows.values()
            for action in d.actions
            if (d.name, action) not in self._adapters and (None, action) not in self._adapters
        )
        every_action = {action for d in flows.values() for action in d.actions}
        strays: list[str] = []
        for flow, action in self._adapters:
            if flow is not None and flow not in flows:
                meant = closest(flow, flows, shared_words=False)
                hint = f"; did you mean flow={meant!r}?" if meant else ""
                strays.append(
                    f"the adapter for {flow}.{action} names flow {flow!r}, which is not "
                    f"registered (flows: {', '.join(sorted(flows))}){hint}"
                )
            elif action not in (every_action if flow is None else flows[flow].actions):
                actions = every_action if flow is None else flows[flow].actions
                meant = closest(action, actions, shared_words=False)
                where = "no registered flow invokes" if flow is None else f"flow {flow} invokes no"
                hint = f"; did you mean {meant!r}?" if meant else ""
                label = action if flow is None else f"{flow}.{action}"
                strays.append(f"the adapter for {label!r}: {where} action {action!r}{hint}")
        problems = list(strays)
        if missing:
            problems.append(
                f"no action adapter for {', '.join(missing)}: register each with "
                ".with_action_adapter(action, callable)"
            )
        if problems:
            raise FlowDefinitionError("; ".join(problems))

    def _check_config(self, config: SchedulingConfig) -> None:
        problems = config_problems(self._flows, config)
        if not problems:
            return
        if self._config_check == "error":
            raise FlowConfigError(problems)
        for problem in problems:
            log.warning("configuration: %s", problem)
