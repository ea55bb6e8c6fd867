"""Internal: routes - the one key both adapters deliver on.

An item addressed to a named handler has the route ``"h:<name>"``; one without a name is
routed by its kind, ``"k:<KIND>"``. The delivery core (:mod:`flowsched.delivery`) looks a
due item's route up in its table of subscribers; the MongoDB adapter stores the route on
each document and claims only the routes its node serves.
"""

from __future__ import annotations

__all__ = ["KIND_PREFIX", "NAME_PREFIX", "kind_route", "name_route", "route_target"]

NAME_PREFIX = "h:"
"""Prefix of a named handler's route."""

KIND_PREFIX = "k:"
"""Prefix of a kind's route."""


def kind_route(kind: str) -> str:
    """The route of items of ``kind`` without a handler name: ``"k:<KIND>"`` (``kind``: a
    :class:`~flowsched.ScheduleKind`, or a kind name as stored).

    >>> kind_route("TIMER")
    'k:TIMER'
    """
    return KIND_PREFIX + kind


def name_route(name: str) -> str:
    """The route of items addressed to handler ``name``: ``"h:<name>"``.

    >>> name_route("send-reminder")
    'h:send-reminder'
    """
    return NAME_PREFIX + name


def route_target(route: object) -> tuple[str | None, str | None]:
    """``(handler, kind)`` of a stored route: one of them is set for a route made by
    :func:`name_route` or :func:`kind_route`, neither for anything else.

    >>> route_target("h:send-reminder"), route_target("k:TIMER"), route_target(None)
    (('send-reminder', None), (None, 'TIMER'), (None, None))
    """
    if isinstance(route, str):
        if route.startswith(NAME_PREFIX):
            return route[len(NAME_PREFIX) :], None
        if route.startswith(KIND_PREFIX):
            return None, route[len(KIND_PREFIX) :]
    return None, None
