"""The flow domain: flows declared in Python, with time handled through a scheduler port.

Declare a flow with :class:`Flow`, register it on :meth:`FlowDomain.builder` with a
``SchedulingConfig`` and a scheduler adapter, then ``domain.start(...)`` instances and
``domain.handle(flow_id, event)`` their responses. Timeouts, retries and processing-time
deadlines come from the configuration and reach the flow as :class:`ActionTimeoutEvent` and
:class:`ProcessingTimeElapsedEvent`.

The modules (every one internal; import from here or from ``flowsched``):

* ``definition`` - ``Flow``: states, actions, responses, transitions; ``check`` - that the
  configuration's keys name registered flows, states and actions.
* ``builder`` - ``FlowDomain.builder()``; ``domain`` - ``FlowDomain``, which runs instances
  and applies decisions through the scheduler port.
* ``planner`` - the decision logic (what a start, an event or a fired timer changes);
  ``decision`` - ``Decision``, everything one such decision changes; ``due_times`` - when
  each timer is due, from the configuration.
* ``instance`` - ``FlowInstance``; ``offsets`` - the points in time deadlines count from;
  ``timers`` - the ids and payloads of the domain's timers.
* ``events`` - ``ActionTimeoutEvent``, ``ProcessingTimeElapsedEvent``, ``ActionRequest``;
  ``timeline`` - ``TimelineEntry`` for listeners.
* ``store`` - the ``FlowStore`` port and ``InMemoryFlowStore``; ``locks`` - one lock per
  instance.
"""

from flowsched.flow.async_domain import AsyncFlowDomain
from flowsched.flow.builder import FlowConfigError, FlowDomainBuilder
from flowsched.flow.definition import ANY_STATE, Flow, FlowDefinition, FlowDefinitionError
from flowsched.flow.domain import (
    ActionAdapter,
    FlowDomain,
    TimerAheadOfInstanceError,
    UnknownFlowError,
)
from flowsched.flow.events import ActionRequest, ActionTimeoutEvent, ProcessingTimeElapsedEvent
from flowsched.flow.instance import FlowInstance
from flowsched.flow.store import (
    AsyncFlowStore,
    ConcurrentUpdateError,
    FlowAlreadyExistsError,
    FlowStore,
    InMemoryFlowStore,
)
from flowsched.flow.timeline import Happened, TimelineEntry

__all__ = [
    "ANY_STATE",
    "ActionAdapter",
    "ActionRequest",
    "ActionTimeoutEvent",
    "AsyncFlowDomain",
    "AsyncFlowStore",
    "ConcurrentUpdateError",
    "Flow",
    "FlowAlreadyExistsError",
    "FlowConfigError",
    "FlowDefinition",
    "FlowDefinitionError",
    "FlowDomain",
    "FlowDomainBuilder",
    "FlowInstance",
    "FlowStore",
    "Happened",
    "InMemoryFlowStore",
    "ProcessingTimeElapsedEvent",
    "TimelineEntry",
    "TimerAheadOfInstanceError",
    "UnknownFlowError",
]
