"""Durable timeouts for the state-machine libraries people already run.

* :mod:`flowsched.integrations.transitions` (extra ``flowsched[transitions]``):
  ``DurableTimeout``, ``DurableMachine`` and ``AsyncDurableMachine`` for ``transitions``.
* :mod:`flowsched.integrations.statemachine` (extra ``flowsched[statemachine]``):
  ``durable_timeout`` and ``StatechartTimers`` for python-statemachine 3.x.

Each timeout is a flowsched timer on the scheduler you give (any ``SchedulerPort``, or an
async scheduler for the async machines), addressed to a handler named after the machine, so
it survives a restart with ``MongoScheduler`` and fires once in a cluster. Importing
``flowsched`` imports neither library; importing one of these modules needs its extra.
"""
