"""``import flowsched`` stays light: the heavy dependencies load only when a feature uses them.

Checked in a fresh interpreter (this one has long imported everything). Timing lives in
``bench/import_bench.py``; here only *what* is imported, which does not depend on the load.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "pydantic",
    "pyhocon",
    "pyparsing",
    "apscheduler",
    "typer",
    "rich",
    "pymongo",
    "bson",
    "holidays",
)


def _loaded_after(code: str) -> list[str]:
    probe = (
        f"{code}\nimport sys, json\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return list(json.loads(out.splitlines()[-1]))


def test_import_flowsched_loads_no_heavy_dependency() -> None:
    assert _loaded_after("import flowsched") == []


def test_version_needs_no_package_metadata() -> None:
    probe = (
        "import flowsched, sys\nprint(flowsched.__version__, 'importlib.metadata' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    version, metadata_loaded = out.stdout.split()
    assert version[0].isdigit()
    assert metadata_loaded == "False"


def test_the_in_memory_scheduler_alone_needs_none_of_them() -> None:
    code = (
        "from datetime import timedelta\n"
        "from flowsched import InMemoryScheduler, ManualClock, ScheduleItem, ScheduleKind\n"
        "clock = ManualClock()\n"
        "s = InMemoryScheduler(clock=clock)\n"
        "s.subscribe(ScheduleKind.TIMER, lambda item, attempt: None)\n"
        "s.schedule(ScheduleItem('t', ScheduleKind.TIMER, clock.now() + timedelta(seconds=1)))\n"
        "clock.advance(timedelta(seconds=2))\n"
    )
    assert _loaded_after(code) == []


def test_a_lazy_name_loads_its_module_when_first_used() -> None:
    assert "pydantic" in _loaded_after("from flowsched import RetryPolicy")
    config = "import flowsched\nflowsched.SchedulingConfig.from_string('')"
    assert "pyhocon" in _loaded_after(config)


def test_the_command_line_loads_typer_but_not_the_rest_for_help() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['flowsched', '--help']\n"
        "from flowsched.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    assert _loaded_after(code) == ["typer"]
