"""Internal: the limits of the ``ipf-scheduler`` settings and the parsers that check one
value against them (each raises ``ValueError`` saying what would be valid; the reader of
:mod:`flowsched.config.scheduler_settings` turns it into a problem naming the key).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from flowsched.durations import parse_duration

__all__ = [
    "DB_NAME",
    "LONGEST_OP_TIMEOUT",
    "LONGEST_SETTING",
    "MAX_BATCH_SIZE",
    "MAX_BUCKETS",
    "MAX_WORKERS",
    "Parse",
    "collection",
    "positive_count",
    "count_up_to",
    "database",
    "duration_above_zero",
    "factor",
    "op_timeout",
    "optional_count",
    "optional_text",
    "postgres_url",
    "table",
    "nonempty_text",
    "uri",
]

LONGEST_SETTING = timedelta(days=365)
"""The longest a scheduler's duration setting may be (poll interval, lease, time-outs,
redelivery waits): a longer one is a mistake, and some overflow the platform's timeouts."""
LONGEST_OP_TIMEOUT = timedelta(days=1)
"""The longest ``op-timeout``: it is also the driver's connection time-outs, which MongoDB
drivers take below a billion milliseconds (11.5 days)."""
MAX_WORKERS = 10_000
"""The most handler threads a scheduler may have (each is an operating-system thread)."""
MAX_BATCH_SIZE = 100_000
"""The most items a MongoDB scheduler may claim in one round trip."""
MAX_BUCKETS = 1024
"""The most buckets a collection may be split into: a node sends one claim query per route
and bucket it serves, and keeps their list (a few per shard is the advice)."""

DB_NAME = re.compile(r'[^/\\. "$*<>:|?]{1,63}')
"""A name MongoDB accepts for a database."""

Parse = Callable[[object], object]
"""A parser: the value a key's text stands for, or ``ValueError`` saying what is valid."""


def duration_above_zero(value: object) -> object:
    """A duration above zero, at most :data:`LONGEST_SETTING`."""
    found = parse_duration(value)
    if found <= timedelta(0) or found > LONGEST_SETTING:
        raise ValueError("must be a duration above zero and at most 365d (e.g. 1s, 500ms)")
    return found


def op_timeout(value: object) -> object:
    """A duration above zero, at most :data:`LONGEST_OP_TIMEOUT`."""
    found = parse_duration(value)
    if found <= timedelta(0) or found > LONGEST_OP_TIMEOUT:
        raise ValueError("must be a duration above zero and at most 1d (e.g. 10s)")
    return found


def positive_count(value: object) -> int:
    """A whole number of at least 1 (also as text, as HOCON may quote it)."""
    from flowsched.backoff import whole_number

    found = whole_number(value, 1)  # also "3", as HOCON may quote it
    if found is None:
        raise ValueError("must be a whole number >= 1")
    return found


def count_up_to(most: int) -> Parse:
    """A parser of a whole number from 1 to ``most``."""

    def at_most(value: object) -> object:
        found = positive_count(value)
        if found > most:
            raise ValueError(f"must be a whole number from 1 to {most:,}")
        return found

    return at_most


def optional_count(value: object) -> object:
    """``None`` (``null`` or ``"none"``) or a :func:`positive_count`."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    return positive_count(value)


def factor(value: object) -> float:
    """A finite number of at least 1 (a backoff factor)."""
    from flowsched.backoff import finite_number

    found = finite_number(value)  # also "2", as HOCON may quote it
    if found is None or found < 1:
        raise ValueError("must be a number >= 1")
    return found


def nonempty_text(value: object) -> object:
    """A string that is not blank."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def optional_text(value: object) -> object:
    """``None`` or a :func:`nonempty_text`."""
    return None if value is None else nonempty_text(value)


def uri(value: object) -> object:
    """A MongoDB connection string (``mongodb://`` or ``mongodb+srv://``)."""
    text = nonempty_text(value)
    assert isinstance(text, str)
    if not text.startswith(("mongodb://", "mongodb+srv://")):
        raise ValueError('must be a MongoDB connection string ("mongodb://host/db")')
    return text


def database(value: object) -> object:
    """A MongoDB database name (:data:`DB_NAME`)."""
    text = nonempty_text(value)
    assert isinstance(text, str)
    if not DB_NAME.fullmatch(text):
        raise ValueError('must be a MongoDB database name (no / \\ . " $ or spaces)')
    return text


def collection(value: object) -> object:
    """A MongoDB collection name of ours (no ``$``, not ``system.*``)."""
    text = nonempty_text(value)
    assert isinstance(text, str)
    if "$" in text or "\0" in text or text.startswith("system.") or "" in text.split("."):
        raise ValueError(
            "must be a MongoDB collection name (no $, not system.*, no empty part between dots)"
        )
    return text


def postgres_url(value: object) -> object:
    """A PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    text = nonempty_text(value)
    assert isinstance(text, str)
    if not text.startswith(("postgresql://", "postgres://")):
        raise ValueError('must be a PostgreSQL URL ("postgresql://user@host/database")')
    return text


def table(value: object) -> object:
    """A lower-case SQL identifier of at most 48 characters."""
    text = nonempty_text(value)
    if not isinstance(text, str) or not re.fullmatch(r"[a-z_][a-z0-9_]{0,47}", text):
        raise ValueError(
            "must be a lower-case SQL identifier of at most 48 characters (a-z, 0-9, _)"
        )
    return text
