"""Durable timeouts for ``transitions`` machines (extra ``flowsched[transitions]``).

transitions' own ``Timeout`` state starts a ``threading.Timer`` per entry; it is gone when
the process stops and exists only where the state was entered. :class:`DurableTimeout` takes
the same state keys - ``timeout`` and ``on_timeout`` - and keeps the timer in a flowsched
scheduler instead: no thread per waiting model, and with ``MongoScheduler`` the timeout
survives a restart and fires once in a cluster::

    from flowsched.integrations.transitions import DurableMachine

    machine = DurableMachine(
        model=order,                      # order.id names its timers
        states=["new", {"name": "awaiting_payment", "timeout": "30m",
                        "on_timeout": "expire"}, "expired", "paid"],
        initial="new",
        scheduler=scheduler,              # any flowsched scheduler
        name="Orders",                    # handler name, and config keys Orders.<State>.Any.*
        config=config,                    # optional: Orders.awaiting_payment.Any.timeout-duration
        load_model=orders.get,            # optional: model id -> model, in another process
    )

Semantics:

* ``timeout``: seconds as a number (as in transitions) or a HOCON duration string (``"30m"``).
  ``<name>.<State>.Any.timeout-duration`` in ``config`` (with ``Any`` precedence) overrides it.
* Entering the state arms timer ``"<name>:<model id>:<state>"`` (``%``, ``:`` and ``#`` in a
  part escaped as ``%25``, ``%3A``, ``%23``) addressed to the handler
  ``<name>``; its payload names the model, the state and the entry. Leaving the state cancels
  it. A timer that fires for a model no longer in that entry of that state does nothing.
* ``on_timeout`` callbacks are called as transitions' async ``Timeout`` calls them: without
  the trigger's arguments (none survive a restart), or with one ``EventData`` (event
  ``"timeout"``) when ``send_event=True``. A callback that raises is handled by the machine's
  ``on_exception`` if it has one; otherwise the timer is redelivered with the scheduler's
  backoff (delivery is at least once).
* A timer whose model is neither in this machine nor found by ``load_model`` (it returns
  ``None`` or raises ``LookupError``) becomes a dead letter saying so (see
  :class:`flowsched.Undeliverable`), not a redelivery loop.
* Nested states (``HierarchicalMachine``) are refused with a ``TypeError``: not supported yet.
"""

from __future__ import annotations

import logging
from typing import Any

try:
    from transitions import Machine
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "flowsched.integrations.transitions needs transitions 0.9: "
        "pip install 'flowsched[transitions]'"
    ) from exc
from transitions.core import EventData
from transitions.extensions.states import add_state_features

from flowsched import ScheduleItem
from flowsched.integrations._binding import FIRING, run_steps
from flowsched.integrations._transitions_async import AsyncDurableMachine
from flowsched.integrations._transitions_core import (
    DurableTimeout,
    MachineFace,
)

__all__ = ["AsyncDurableMachine", "DurableMachine", "DurableTimeout"]

log = logging.getLogger("flowsched.integrations.transitions")


@add_state_features(DurableTimeout)
class DurableMachine(MachineFace, Machine):
    """A ``transitions.Machine`` whose states take ``timeout``/``on_timeout`` (see
    :class:`DurableTimeout`), kept as flowsched timers.

    Keyword arguments besides ``Machine``'s: ``scheduler`` (any synchronous flowsched
    scheduler), ``name`` (the handler name of its timers and the flow part of its config
    keys; also passed to ``Machine`` as its name), ``config`` (a ``SchedulingConfig``),
    ``load_model`` (model id -> model, or ``None``/``LookupError`` when there is none) and
    ``model_id`` (the attribute naming a model, default ``"id"``). Its handler is registered
    on the scheduler when it is built: one machine per name and scheduler.
    """

    def _on_timer(self, item: ScheduleItem, attempt: int) -> None:
        calls = {"load": self._load, "get": self._flowsched.scheduler.get}
        calls["fire"] = self._process_timeout
        run_steps(self._flowsched.timeout_steps(item, Machine), calls)

    def _load(self, owner: str, found_only: bool) -> Any:
        """``load_model(owner)``: a ``LookupError`` is no model (a dead letter; with
        ``found_only``, a second opinion, ``None``)."""
        load = self._flowsched.load_model
        if load is None:
            raise self._flowsched.missing(owner)
        try:
            return load(owner)
        except Exception as exc:
            return self._missed(owner, exc, found_only)

    def _process_timeout(self, state: DurableTimeout, model: Any, owner: str) -> None:
        binding = self._flowsched
        event_data = EventData(
            state, self._create_event("timeout", self), self, model, args=(), kwargs={}
        )
        reset = FIRING.set((id(binding), owner, state.name))
        try:
            self.callbacks(state.on_timeout, event_data)
        except Exception as err:
            if not self.on_exception:
                raise
            event_data.error = err
            self.callbacks(self.on_exception, event_data)
        finally:
            FIRING.reset(reset)
        binding.fired(owner, state.name)
        log.debug("%stimeout of %s in state %s processed", self.name, owner, state.name)


for _public in (DurableTimeout, DurableMachine, AsyncDurableMachine):
    _public.__module__ = __name__  # reprs and tracebacks name the public module
