"""Internal: telling coroutine functions from plain ones, for the two faces' refusals.

A synchronous scheduler or flow domain refuses what :func:`is_async_callable` calls async
(its coroutine would never run); the asyncio face uses it to decide what to await and what
to run in a worker thread.
"""

from __future__ import annotations

import functools
import inspect

__all__ = [
    "check_callable",
    "check_not_generator",
    "is_async_callable",
    "is_generator_callable",
    "refuse_awaitable",
    "short_callable",
]


def is_async_callable(value: object) -> bool:
    """Whether calling ``value`` gives a coroutine to await: an ``async def`` function or
    method, a ``functools.partial`` of one, or an object whose ``__call__`` is ``async``."""
    while isinstance(value, functools.partial):
        value = value.func
    if inspect.iscoroutinefunction(value):
        return True
    if inspect.isfunction(value) or inspect.ismethod(value) or isinstance(value, type):
        return False
    dunder = "__call__"  # looked up on the type, as a call does
    return inspect.iscoroutinefunction(getattr(type(value), dunder, None))


def is_generator_callable(value: object) -> bool:
    """Whether calling ``value`` only makes a generator (a ``def`` or ``async def`` with
    ``yield``, a partial of one, or an object whose ``__call__`` is one): its body would not
    run until someone iterates it, and a scheduler never does."""
    while isinstance(value, functools.partial):
        value = value.func
    if inspect.isfunction(value) or inspect.ismethod(value):
        return inspect.isgeneratorfunction(value) or inspect.isasyncgenfunction(value)
    if isinstance(value, type):
        return False
    call = getattr(type(value), "__call__", None)  # noqa: B004  (looked up on the type)
    return inspect.isgeneratorfunction(call) or inspect.isasyncgenfunction(call)


def short_callable(value: object) -> str:
    """A callable's name for a message (its qualified name, else its type's)."""
    while isinstance(value, functools.partial):
        value = value.func
    name = getattr(value, "__qualname__", None)
    if isinstance(name, str):
        return name
    return f"{type(value).__qualname__} object"


def check_not_generator(value: object, what: str) -> None:
    """``TypeError`` for a generator function: called, it only makes a generator, so the
    timer would count as delivered with its body never run."""
    if is_generator_callable(value):
        raise TypeError(
            f"{what}: {short_callable(value)} is a generator function (it contains yield); "
            "calling it only creates a generator and its body would never run: remove the "
            "yield"
        )


def check_callable(value: object, what: str) -> None:
    """``TypeError`` naming ``what`` when ``value`` cannot be called."""
    if not callable(value):
        raise TypeError(f"{what}: expected a callable, got {value!r}")


def refuse_awaitable(result: object, handler: object, async_class: str) -> None:
    """A synchronous delivery's handler returned an awaitable: close it (no "never awaited"
    warning) and fail the delivery, so that the item is redelivered, never completed unrun."""
    if inspect.iscoroutine(result):
        result.close()
    raise TypeError(
        f"handler {short_callable(handler)} returned {type(result).__name__} (an awaitable) "
        f"to a synchronous scheduler, which cannot await it: use {async_class}"
    )
