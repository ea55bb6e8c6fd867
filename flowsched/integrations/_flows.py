"""Internal: a state machine's states as a ``flowsched.Flow``, for ``flowsched check --flows``.

A machine's config keys are ``<name>.<State>.Any.<type>``: the check then reports a key
naming a state the machine does not have, or an action other than ``Any`` (machines have
none), as it does for flows.
"""

from __future__ import annotations

from collections.abc import Iterable

from flowsched import Flow

__all__ = ["machine_flow"]


def machine_flow(name: str, states: Iterable[str]) -> Flow:
    """A ``Flow`` named ``name`` with these states and no actions."""
    names = [str(state) for state in states]
    if not names:
        raise ValueError(f"machine {name!r} has no states")
    flow = Flow(name).initial(names[0])
    for state in names[1:]:
        flow = flow.state(state)
    return flow
