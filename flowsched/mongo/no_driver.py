"""Internal: stand-ins for the MongoDB classes when pymongo is not installed.

``import flowsched`` works without the driver; building a ``MongoScheduler`` or a
``MongoFlowStore`` then raises an ``ImportError`` that names the extra to install.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["MissingDriverAsyncFlowStore", "MissingDriverFlowStore", "MissingDriverScheduler"]


class MissingDriverScheduler:
    """Stands in for ``MongoScheduler``: raises ``ImportError``, the MongoDB driver is missing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _missing("MongoScheduler")

    @classmethod
    def from_config(cls, *args: Any, **kwargs: Any) -> NoReturn:
        """Raises ``ImportError``, as the constructor does."""
        _missing("MongoScheduler")


class MissingDriverFlowStore:
    """Stands in for ``MongoFlowStore``: raises ``ImportError``, the driver is missing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _missing("MongoFlowStore")


class MissingDriverAsyncFlowStore:
    """Stands in for ``AsyncMongoFlowStore``: raises ``ImportError``, the driver is missing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _missing("AsyncMongoFlowStore")


def _missing(name: str) -> NoReturn:
    raise ImportError(
        f"{name} needs the MongoDB driver: pip install 'flowsched[mongo]' (pymongo>=4.13)"
    )
