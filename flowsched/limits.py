"""Internal: the limits every adapter enforces on what it stores, and the checks behind them.

Ids (item and flow ids), handler names and payloads are checked here, the same way for every
adapter, so an item one adapter accepts the other accepts too. The payload codec (compact,
interned JSON) lives here because its size is one of the limits.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "INT64_RANGE",
    "MAX_HANDLER_NAME",
    "MAX_ID_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "check_handler_name",
    "check_id",
    "payload_text",
    "short_repr",
]

MAX_PAYLOAD_BYTES = 1024
"""Largest payload, in bytes of compact UTF-8 JSON. Pass an id, not the data."""

MAX_PAYLOAD_DEPTH = 32
"""Deepest nesting of objects and lists in a payload (checked before encoding it)."""

MAX_ID_BYTES = 1024
"""Longest item id (and flow id), in UTF-8 bytes. Both adapters accept the same ids."""


MAX_HANDLER_NAME = 200
"""Longest handler name, in characters."""


def check_handler_name(name: object) -> str:
    """``name`` if it is a valid handler name (a wire name: a non-empty string of at most
    :data:`MAX_HANDLER_NAME` characters without control characters); else ``ValueError``
    naming it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"handler name must be a non-empty string (got {name!r})")
    if len(name) > MAX_HANDLER_NAME:
        raise ValueError(
            f"handler name {name[:40]!r}... is {len(name)} characters; the limit is "
            f"{MAX_HANDLER_NAME}"
        )
    if any(ord(char) < 32 or 127 <= ord(char) < 160 for char in name):
        raise ValueError(f"handler name {name!r} contains a control character")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"handler name {name!r} is not valid Unicode (a lone surrogate)") from None
    return name


def check_id(value: object, what: str = "id") -> str:
    """``value`` if it is a usable id: a non-empty string of at most :data:`MAX_ID_BYTES`
    UTF-8 bytes, without NUL characters or lone surrogates (which MongoDB cannot store);
    ``ValueError`` naming ``what`` otherwise. The same rule on every adapter."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string (got {short_repr(value, 80)})")
    if len(value) > MAX_ID_BYTES:  # cheap bound first: a character is at least one byte
        raise ValueError(f"{what} is {len(value)} characters; the limit is {MAX_ID_BYTES} bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} {short_repr(value, 80)} is not valid Unicode text (a lone surrogate)"
        ) from None
    if size > MAX_ID_BYTES:
        raise ValueError(f"{what} is {size} bytes in UTF-8; the limit is {MAX_ID_BYTES} bytes")
    if "\x00" in value:
        raise ValueError(f"{what} {short_repr(value, 80)} contains a NUL character")
    return value


def short_repr(value: object, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 16 MB id in a message helps no one)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


INT64_RANGE = (-(2**63), 2**63 - 1)
"""The integers a payload may hold: BSON's (and jsonb's bigint) signed 64 bits."""

_LONG_DIGITS = re.compile(r"[0-9]{19}")
"""19 digits in a row: the text may hold an integer beyond 64 bits (the largest has 19)."""


def _check_storable(payload: Mapping[str, Any]) -> None:
    """``ValueError`` naming the path (``payload["a"][0]``) of the first part of ``payload``
    that some adapter cannot store exactly: a nesting deeper than :data:`MAX_PAYLOAD_DEPTH`,
    a NUL character in a key (MongoDB cannot store it) or in a string (PostgreSQL's jsonb
    cannot), an integer outside :data:`INT64_RANGE` (neither can). Walked without recursion,
    so a payload nested thousands deep cannot raise RecursionError."""
    stack: list[tuple[object, int, str]] = [(payload, 1, "payload")]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, Mapping):
            if any(isinstance(key, str) and "\x00" in key for key in value):
                raise ValueError(f"{path} has a key with a NUL character (MongoDB cannot store it)")
            children: Iterable[tuple[object, str]] = (
                (child, f"{path}[{short_repr(key, 40)}]") for key, child in value.items()
            )
        elif isinstance(value, list | tuple):
            children = ((child, f"{path}[{n}]") for n, child in enumerate(value))
        elif isinstance(value, str):
            if "\x00" in value:
                raise ValueError(
                    f"{path} holds a NUL character, which PostgreSQL cannot store (jsonb): "
                    "no adapter accepts it"
                )
            continue
        elif isinstance(value, int) and not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise ValueError(
                f"{path} = {short_repr(value, 60)} is an integer beyond signed 64 bits: it "
                "cannot be stored in MongoDB or PostgreSQL, so no adapter accepts it (pass it "
                "as a string)"
            )
        else:
            continue
        if depth > MAX_PAYLOAD_DEPTH:
            raise ValueError(
                f"payload nests objects/lists more than {MAX_PAYLOAD_DEPTH} deep "
                "(pass an id and let the handler read the data)"
            )
        stack.extend((child, depth + 1, where) for child, where in children)


_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

_PASSED: dict[str, str] = {}
"""Texts that passed the checks below, each its interned self. The verdict depends on the
text alone (the nesting, a NUL, a long integer and the size all show in it), so a text met
again - the flow domain's payloads repeat per state - skips the scans. Bounded: emptied at
:data:`_PASSED_MAX` entries, and no text over :data:`_PASSED_CHARS` characters is kept."""

_PASSED_MAX = 1024
_PASSED_CHARS = 256


def payload_text(payload: Mapping[str, Any]) -> str:
    """Compact JSON of ``payload``, interned: equal payloads (the flow domain's timers of one
    state, for example) share one string in memory, however many items carry them."""
    try:
        text: str = _JSON.encode(payload)
    except RecursionError:
        _check_storable(payload)  # raises, naming the limit
        raise ValueError("payload must be JSON-serialisable: nested too deep") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload must be JSON-serialisable: {exc}") from None
    passed = _PASSED.get(text)
    if passed is not None:
        return passed
    # Nesting past the limit takes more brackets than the limit, a NUL shows as an escape,
    # and an integer beyond 64 bits as 19 digits or more: only then is the payload walked (a
    # flat one costs three scans of its text).
    if (
        text.count("{") + text.count("[") > MAX_PAYLOAD_DEPTH
        or "\\u0000" in text
        or _LONG_DIGITS.search(text)
    ):
        _check_storable(payload)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(
            f"payload is {size} bytes encoded as JSON; the limit is "
            f"{MAX_PAYLOAD_BYTES} bytes (pass an id and let the handler read the data)"
        )
    text = sys.intern(text)
    if len(text) <= _PASSED_CHARS:
        if len(_PASSED) >= _PASSED_MAX:
            _PASSED.clear()
        _PASSED[text] = text
    return text
