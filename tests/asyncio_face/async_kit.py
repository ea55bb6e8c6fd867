"""Helpers of the asyncio-face tests: a fresh mongomock collection, a real-time wait, and
the tasks that run flowsched's code."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import flowsched

PACKAGE = Path(flowsched.__file__).resolve().parent


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


def flowsched_tasks(tasks: Iterable[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """The tasks among ``tasks`` whose coroutine is flowsched's code: defined in a file of
    the installed package's directory. (Not "flowsched" anywhere in the file's path: in a
    checkout named ``flowsched``, the driver's own tasks, from ``.venv``, matched that.)"""
    found = []
    for task in tasks:
        code = getattr(task.get_coro(), "cr_code", None)
        if code is not None and Path(code.co_filename).resolve().is_relative_to(PACKAGE):
            found.append(task)
    return found
