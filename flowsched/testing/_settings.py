"""The ``flowsched`` marker: settings for the test kit's scheduler fixtures.

``@pytest.mark.flowsched(max_attempts=3, redelivery=RedeliveryPolicy(...), ...)`` on a test,
a class or a module (``pytestmark``) builds every scheduler fixture that test uses with those
settings: the keywords are the scheduler class's own constructor keywords (``redelivery``,
``observer``, ``workers``, ``lease``...), plus ``max_attempts``, which sets the redelivery
policy's ``max_attempts`` (on the default policy, or on the ``redelivery`` given). Markers
closer to the test win, keyword by keyword. A keyword the fixture's scheduler does not take is
a ``TypeError`` naming it, the class and the keywords it does take, at set-up.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from flowsched.redelivery import RedeliveryPolicy

__all__ = ["MARKER", "MARKER_HELP", "marked_settings"]

MARKER = "flowsched"
MARKER_HELP = (
    "flowsched(**settings): build the flowsched test kit's scheduler fixtures with these "
    "constructor settings (max_attempts=, redelivery=, observer=, ...)"
)

# Set by the fixture itself: a marker cannot move them.
_FIXED = frozenset({"self", "clock", "collection"})


def marked_settings(request: pytest.FixtureRequest, scheduler_class: type) -> dict[str, Any]:
    """The constructor keywords the ``flowsched`` markers on ``request``'s test give for
    ``scheduler_class`` (an empty dict when the test has none)."""
    settings: dict[str, Any] = {}
    # iter_markers yields the closest first: apply the farthest first so the closest wins.
    for marker in reversed(list(request.node.iter_markers(MARKER))):
        if marker.args:
            raise TypeError(
                f"@pytest.mark.{MARKER} takes keywords only (got positional {marker.args!r})"
            )
        settings.update(marker.kwargs)
    if not settings:
        return settings
    max_attempts = settings.pop("max_attempts", None)
    accepted = sorted(
        name for name in inspect.signature(scheduler_class).parameters if name not in _FIXED
    )
    unknown = sorted(set(settings) - set(accepted))
    if unknown:
        raise TypeError(
            f"@pytest.mark.{MARKER}: {scheduler_class.__name__} takes no setting "
            f"{', '.join(map(repr, unknown))} (it takes max_attempts, {', '.join(accepted)})"
        )
    if max_attempts is not None:
        policy = settings.get("redelivery") or RedeliveryPolicy()
        if not isinstance(policy, RedeliveryPolicy):
            raise TypeError(
                f"@pytest.mark.{MARKER}: redelivery must be a RedeliveryPolicy (got {policy!r})"
            )
        settings["redelivery"] = dataclasses.replace(policy, max_attempts=max_attempts)
    return settings
