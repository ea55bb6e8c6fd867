"""The synchronous classes never run a coroutine function as if it were a plain one.

``subscribe``/``register`` refuse an ``async def`` (also a bound async method, a
``functools.partial`` of one, or an object whose ``__call__`` is async) with a ``TypeError``
that names it and the async class to use; the flow builder refuses an ``async def`` action
adapter at ``build()`` (and accepts it at ``build_async()``). A plain function that returns
a coroutine anyway never completes its item: the delivery fails, and the item stays.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import mongomock
import pytest

from flowsched import (
    AsyncFlowStore,
    AsyncInMemoryScheduler,
    Flow,
    FlowDomain,
    FlowInstance,
    InMemoryFlowStore,
    InMemoryScheduler,
    ManualClock,
    MongoScheduler,
    ScheduleItem,
    ScheduleKind,
    SchedulerPort,
    SchedulingConfig,
)
from flowsched.flow import ActionRequest
from flowsched.testing import CLOCK_START

TIMER = ScheduleKind.TIMER


async def on_timer(item: ScheduleItem, attempt: int) -> None:
    """An async handler: the sync schedulers must refuse it."""


class Service:
    async def handle(self, item: ScheduleItem, attempt: int) -> None:
        """An async method."""


class AsyncCallable:
    async def __call__(self, item: ScheduleItem, attempt: int) -> None:
        """An object whose __call__ is async."""


ASYNC_HANDLERS: dict[str, Callable[..., Any]] = {
    "async def": on_timer,
    "bound async method": Service().handle,
    "partial of async def": functools.partial(on_timer),
    "object with async __call__": AsyncCallable(),
}

SYNC_CLASSES: dict[str, tuple[Callable[[ManualClock], SchedulerPort], str]] = {
    "InMemoryScheduler": (lambda clock: InMemoryScheduler(clock=clock), "AsyncInMemoryScheduler"),
    "MongoScheduler": (
        lambda clock: MongoScheduler(
            mongomock.MongoClient()["refuse"]["timers"], node_id="n", clock=clock
        ),
        "AsyncMongoScheduler",
    ),
}


@pytest.fixture(params=list(SYNC_CLASSES))
def sync_scheduler(request: pytest.FixtureRequest) -> Iterator[tuple[SchedulerPort, str]]:
    build, async_class = SYNC_CLASSES[request.param]
    scheduler = build(ManualClock(CLOCK_START))
    scheduler.start()
    yield scheduler, async_class
    scheduler.close()


@pytest.mark.parametrize("shape", list(ASYNC_HANDLERS))
def test_subscribe_refuses_a_coroutine_function_naming_the_async_class(
    sync_scheduler: tuple[SchedulerPort, str], shape: str
) -> None:
    scheduler, async_class = sync_scheduler
    with pytest.raises(TypeError, match=async_class) as raised:
        scheduler.subscribe(TIMER, ASYNC_HANDLERS[shape])
    assert "coroutine function" in str(raised.value)
    # Refused means not registered: a plain handler may take the kind afterwards.
    scheduler.subscribe(TIMER, lambda item, attempt: None)


@pytest.mark.parametrize("shape", list(ASYNC_HANDLERS))
def test_register_refuses_a_coroutine_function(
    sync_scheduler: tuple[SchedulerPort, str], shape: str
) -> None:
    scheduler, async_class = sync_scheduler
    with pytest.raises(TypeError, match=async_class):
        scheduler.register("send-reminder", ASYNC_HANDLERS[shape])
    with pytest.raises(TypeError, match="on_failed"):
        scheduler.register("other", lambda item, attempt: None, on_failed=on_timer)


def test_on_failed_is_plain_on_the_async_face_too() -> None:
    scheduler = AsyncInMemoryScheduler(clock=ManualClock(CLOCK_START))
    with pytest.raises(TypeError, match="on_failed is called synchronously"):
        scheduler.register("other", on_timer, on_failed=on_timer)


def test_the_message_names_the_handler(sync_scheduler: tuple[SchedulerPort, str]) -> None:
    scheduler, _ = sync_scheduler
    with pytest.raises(TypeError, match="on_timer"):
        scheduler.subscribe(TIMER, on_timer)


def test_a_plain_handler_returning_a_coroutine_never_completes_its_item(
    sync_scheduler: tuple[SchedulerPort, str],
) -> None:
    scheduler, _async_class = sync_scheduler
    clock = scheduler_clock(scheduler)
    seen: list[int] = []

    def sneaky(item: ScheduleItem, attempt: int) -> object:
        seen.append(attempt)
        return on_timer(item, attempt)  # a coroutine nobody here can await

    scheduler.subscribe(TIMER, sneaky)
    scheduler.schedule(ScheduleItem("t", TIMER, CLOCK_START + timedelta(seconds=1)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would fail here
        clock.advance(timedelta(seconds=1))
    assert seen == [0]
    assert scheduler.exists("t"), "an item whose coroutine never ran was completed"
    stored = scheduler.get("t")
    assert stored is not None and stored.due == CLOCK_START + timedelta(seconds=4)


def scheduler_clock(scheduler: SchedulerPort) -> ManualClock:
    clock = scheduler._clock  # type: ignore[attr-defined]
    assert isinstance(clock, ManualClock)
    return clock


FLOW = Flow("Payment").initial("Checking", invokes=["Check"]).terminal("Done")


async def check(request: ActionRequest) -> None:
    """An async action adapter."""


def builder(scheduler: Any) -> Any:
    return (
        FlowDomain.builder()
        .with_config(SchedulingConfig.empty())
        .with_scheduler_adapter(scheduler)
        .with_flow(FLOW)
    )


def test_build_refuses_an_async_action_adapter_naming_build_async() -> None:
    b = builder(InMemoryScheduler(clock=ManualClock(CLOCK_START))).with_action_adapter(
        "Check", check
    )
    with pytest.raises(TypeError, match=r"Check.*build_async"):
        b.build()


def test_build_async_accepts_it() -> None:
    domain = (
        builder(AsyncInMemoryScheduler(clock=ManualClock(CLOCK_START)))
        .with_action_adapter("Check", check)
        .build_async()
    )
    assert type(domain).__name__ == "AsyncFlowDomain"


class AsyncStore:
    """An asyncio flow store (coroutine calls) over a dict: what an async MongoDB store is."""

    def __init__(self) -> None:
        self.inner = InMemoryFlowStore()

    async def load(self, flow_id: str) -> FlowInstance | None:
        return self.inner.load(flow_id)

    async def insert(self, instance: FlowInstance) -> FlowInstance:
        return self.inner.insert(instance)

    async def update(self, instance: FlowInstance) -> FlowInstance:
        return self.inner.update(instance)


def test_build_refuses_an_async_flow_store_naming_build_async() -> None:
    store = AsyncStore()
    b = builder(InMemoryScheduler(clock=ManualClock(CLOCK_START))).with_flow_store(store)
    b = b.with_action_adapter("Check", lambda request: None)
    with pytest.raises(TypeError, match=r"coroutine load/insert/update.*build_async"):
        b.build()
    assert store.inner.load("p-1") is None


@pytest.mark.asyncio
async def test_build_async_keeps_instances_in_an_async_flow_store() -> None:
    store = AsyncStore()
    assert isinstance(store, AsyncFlowStore)
    scheduler = AsyncInMemoryScheduler(clock=ManualClock(CLOCK_START))
    domain = builder(scheduler).with_flow_store(store).with_action_adapter("Check", check)
    async with scheduler:
        await domain.build_async().start("Payment", "p-1")
    stored = store.inner.load("p-1")
    assert stored is not None and stored.state == "Checking"


def test_each_face_refuses_the_other_scheduler() -> None:
    plain = lambda request: None  # noqa: E731
    with pytest.raises(TypeError, match="build_async"):
        builder(AsyncInMemoryScheduler()).with_action_adapter("Check", plain).build()
    with pytest.raises(TypeError, match="synchronous scheduler"):
        builder(InMemoryScheduler()).with_action_adapter("Check", plain).build_async()


def test_a_sync_adapter_returning_a_coroutine_is_a_failed_invocation() -> None:
    clock = ManualClock(CLOCK_START)
    scheduler = InMemoryScheduler(clock=clock)
    calls: list[int] = []

    def sneaky(request: ActionRequest) -> object:
        calls.append(request.attempt)
        return check(request)

    conf = "Payment.Checking.Check { max-retries = 1, initial-retry-interval = 1s, "
    conf += "jitter-enabled = false }"
    domain = (
        FlowDomain.builder()
        .with_config(SchedulingConfig.from_string(conf))
        .with_scheduler_adapter(scheduler)
        .with_clock(clock)
        .with_flow(FLOW)
        .with_action_adapter("Check", sneaky)
        .build()
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        domain.start("Payment", "p-1")
        clock.advance(timedelta(seconds=1))
    assert calls == [1, 2], "the retry did not apply after an unawaitable response"


def _generator(item: ScheduleItem, attempt: int) -> Iterator[None]:
    yield None


async def _async_generator(item: ScheduleItem, attempt: int) -> Any:
    yield None


class _GeneratorCall:
    def __call__(self, item: ScheduleItem, attempt: int) -> Iterator[None]:
        yield None


GENERATORS = {
    "generator function": _generator,
    "async generator function": _async_generator,
    "partial of a generator function": functools.partial(_generator),
    "object with a generator __call__": _GeneratorCall(),
}


def _every_scheduler() -> dict[str, Callable[[], Any]]:
    from flowsched import AsyncInMemoryScheduler, AsyncMongoScheduler

    clock = ManualClock(CLOCK_START)
    collection = mongomock.MongoClient(tz_aware=True)["refuse"]["generators"]
    return {
        "InMemoryScheduler": lambda: InMemoryScheduler(clock=clock),
        "MongoScheduler": lambda: MongoScheduler(collection, node_id="n", clock=clock),
        "AsyncInMemoryScheduler": lambda: AsyncInMemoryScheduler(clock=clock),
        "AsyncMongoScheduler": lambda: AsyncMongoScheduler(collection, node_id="a", clock=clock),
    }


@pytest.mark.parametrize("cls", list(_every_scheduler()))
@pytest.mark.parametrize("shape", list(GENERATORS))
def test_every_scheduler_refuses_a_generator_function_as_a_handler(cls: str, shape: str) -> None:
    """Called, it only makes a generator: the timer counted as delivered, its body never
    run (on all four classes)."""
    scheduler = _every_scheduler()[cls]()
    handler = GENERATORS[shape]
    with pytest.raises(TypeError, match=r"generator function .*would never run"):
        scheduler.register("h", handler)
    with pytest.raises(TypeError, match="generator function"):
        scheduler.subscribe(TIMER, handler)
    with pytest.raises(TypeError, match=r"on_failed: .*generator function"):
        scheduler.register("g", lambda item, attempt: None, on_failed=handler)
    scheduler.register("h", lambda item, attempt: None)  # refused means not registered
