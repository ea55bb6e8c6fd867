"""Internal: the drivers that run a :class:`~flowsched.node.core.NodeCore` — the only places
that wait. :mod:`flowsched.drivers.threads` waits on a condition variable and runs handlers
in a thread pool; :mod:`flowsched.drivers.asyncio` awaits on the running loop. Both ask the
core for an action, perform it (:func:`~flowsched.node.core.store_call`), feed the result
back; both also drive it inline, on the caller's thread or task, for ``run_due`` and
:class:`~flowsched.ManualClock` steps.
"""
