"""The asyncio tests' own helpers: ``flowsched_tasks`` picks out the tasks that run
flowsched's code, wherever the checkout is (``make test`` failed in a checkout whose path
contains "flowsched", the folder ``git clone`` makes: the driver's tasks, in ``.venv``,
were counted as flowsched's)."""

from __future__ import annotations

import asyncio

from async_kit import PACKAGE, flowsched_tasks


def _coroutine_defined_in(filename: str) -> object:
    namespace: dict[str, object] = {}
    exec(compile("async def monitor():\n    pass\n", filename, "exec"), namespace)
    return namespace["monitor"]


def test_only_tasks_running_the_packages_code_count() -> None:
    # The driver of a checkout cloned into a folder named flowsched (not this one's).
    driver = _coroutine_defined_in("/home/dev/flowsched/.venv/lib/pymongo/monitor.py")
    ours = _coroutine_defined_in(str(PACKAGE / "mongo" / "async_sweeper.py"))

    async def scenario() -> list[str]:
        tasks = [
            asyncio.get_running_loop().create_task(coroutine(), name=name)  # type: ignore[operator]
            for name, coroutine in (("driver", driver), ("ours", ours))
        ]
        picked = [task.get_name() for task in flowsched_tasks(tasks)]
        await asyncio.gather(*tasks)
        return picked

    assert asyncio.run(scenario()) == ["ours"]
