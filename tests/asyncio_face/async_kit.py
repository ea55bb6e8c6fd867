"""Helpers of the asyncio-face tests: a fresh mongomock collection and a real-time wait."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any


def mongomock_collection() -> Any:
    """A fresh mongomock collection (``tz_aware``, as flowsched's clients are)."""
    import mongomock

    return mongomock.MongoClient(tz_aware=True)["flowsched"][f"timers_{uuid.uuid4().hex[:6]}"]


async def until(condition: Callable[[], object], seconds: float = 10.0, step: float = 0.01) -> bool:
    """Wait in real time, without blocking the loop, until ``condition()`` holds or
    ``seconds`` pass; whether it holds at the end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(step)
    return bool(condition())
