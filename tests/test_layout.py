"""The house rules a newcomer relies on: public names print as ``flowsched.X``, every error
flowsched raises on purpose is one ``flowsched`` name under ``FlowschedError``, no module
grows past 450 lines and no two classes share a name."""

from __future__ import annotations

import ast
import collections
import importlib
import pkgutil
import traceback
from datetime import UTC, datetime
from pathlib import Path

import pytest

import flowsched
import flowsched.mongo

ROOT = Path(flowsched.__file__).parent
MAX_MODULE_LINES = 450


def _modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_public_classes_print_as_flowsched_names() -> None:
    item = flowsched.ScheduleItem(
        "t-1", flowsched.ScheduleKind.TIMER, datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert repr(type(item)) == "<class 'flowsched.ScheduleItem'>"
    assert repr(flowsched.MongoScheduler) == "<class 'flowsched.MongoScheduler'>"
    internal = [
        name
        for name in flowsched.__all__
        if isinstance(getattr(flowsched, name), type)
        and getattr(flowsched, name).__module__ != "flowsched"
    ]
    assert internal == []


def test_a_traceback_names_the_public_error() -> None:
    with pytest.raises(flowsched.ConfigError) as caught:
        flowsched.parse_duration("2 fortnights")
    last = traceback.format_exception(caught.value)[-1]
    assert last.startswith("flowsched.ConfigError: ")


def _error_classes() -> set[type[BaseException]]:
    for info in pkgutil.walk_packages([str(ROOT)], prefix="flowsched."):
        importlib.import_module(info.name)
    found: set[type[BaseException]] = set()
    todo: list[type[BaseException]] = [flowsched.FlowschedError]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_flowsched_error_is_a_public_name() -> None:
    hidden = sorted(
        cls.__qualname__
        for cls in _error_classes()
        if getattr(flowsched, cls.__name__, None) is not cls
    )
    assert hidden == []


def test_every_exception_class_of_ours_is_a_flowsched_error() -> None:
    outside = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")):
                module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
                cls = getattr(importlib.import_module(module.removesuffix(".__init__")), node.name)
                if not issubclass(cls, flowsched.FlowschedError):
                    outside.append(f"{module}.{node.name}")
    assert outside == []


def test_the_errors_live_in_one_module() -> None:
    assert {cls.__name__ for cls in _error_classes()} <= set(
        importlib.import_module("flowsched.errors").__all__
    )


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_two_classes_share_a_name() -> None:
    where: dict[str, list[str]] = collections.defaultdict(list)
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(ROOT)))
    assert {name: files for name, files in where.items() if len(files) > 1} == {}
