"""Stand-in for ``MongoScheduler`` when pymongo is not installed (``import flowsched`` works)."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["MongoScheduler"]


class MongoScheduler:
    """Raises ``ImportError``: the MongoDB driver is missing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _missing()

    @classmethod
    def from_config(cls, *args: Any, **kwargs: Any) -> NoReturn:
        """Raises ``ImportError``, as the constructor does."""
        _missing()


def _missing() -> NoReturn:
    raise ImportError(
        "MongoScheduler needs the MongoDB driver: pip install 'flowsched[mongo]' (pymongo>=4.6)"
    )
