"""Internal: the node core (no I/O) and the generic scheduler classes built on it.

See :mod:`flowsched.node.core` for the decisions, :mod:`flowsched.drivers` for the two
drivers, and :mod:`flowsched.node.scheduler` for how a store becomes a scheduler class.
"""
