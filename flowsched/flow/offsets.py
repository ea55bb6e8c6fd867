"""Internal: offsets, the named points in time a processing-time deadline can count from.

System offsets are recorded by the domain: entering a state records its entry time under the
state's name. Custom offsets come with a flow's input (``domain.start(..., offsets=...)``),
for example a client's accepted timestamp, or a parent flow's whole offset map handed to a
child. Offsets are one map: entering a state (re-)records the offset under its name, so name
custom offsets apart from states (``accepted``, not ``Accepted`` when a state is so named).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from flowsched.clock import ensure_utc

__all__ = ["custom_offsets", "deadline_base"]

log = logging.getLogger("flowsched.flow")


def custom_offsets(offsets: Mapping[str, datetime] | None) -> dict[str, datetime]:
    """Validate offsets given on a flow's input: non-empty names, aware datetimes (as UTC)."""
    result: dict[str, datetime] = {}
    for name, when in (offsets or {}).items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"offset names must be non-empty strings (got {name!r})")
        if not isinstance(when, datetime):
            raise TypeError(f"offset {name!r} must be a datetime (got {type(when).__name__})")
        result[name] = ensure_utc(when, f"offset {name!r}")
    return result


def deadline_base(
    offsets: Mapping[str, datetime],
    offset_id: str | None,
    entered_at: datetime,
    *,
    where: str,
) -> datetime:
    """The time a deadline counts from: the offset named ``offset_id``, else ``entered_at``.

    An ``offset_id`` the instance has no offset for falls back to ``entered_at`` with a
    warning naming ``where`` (the config key) and the offsets the instance does have."""
    if offset_id is None:
        return entered_at
    found = offsets.get(offset_id)
    if found is None:
        log.warning(
            "%s: offset-id %r is not an offset of this instance (it has: %s); "
            "counting from the source state's entry time instead",
            where,
            offset_id,
            ", ".join(sorted(offsets)) or "none",
        )
        return entered_at
    return found
