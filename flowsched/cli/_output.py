"""Internal: CLI output helpers — a console that does not wrap tables, and error exits."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

from flowsched.config import SchedulingConfig
from flowsched.durations import format_duration
from flowsched.errors import ConfigError, ConfigProblem
from flowsched.records import ScheduleKind

__all__ = [
    "EXIT_INVALID",
    "EXIT_USAGE",
    "console",
    "fail",
    "human",
    "kind_option",
    "load",
    "report_problems",
]

EXIT_INVALID = 1
"""The configuration has problems."""
EXIT_USAGE = 2
"""Bad arguments, or a file that cannot be read."""


def console() -> Console:
    """A console on stdout; wide when piped, so that keys in tables are not cut or folded."""
    out = Console(highlight=False)
    return out if out.is_terminal else Console(highlight=False, width=240)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one ``flowsched: error: ...`` line on stderr and exit with ``code``."""
    print(f"flowsched: error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def kind_option(value: str | None) -> ScheduleKind | None:
    """The :class:`ScheduleKind` a ``--kind`` names (any case), or exit naming the valid ones."""
    if value is None:
        return None
    try:
        return ScheduleKind(value.upper())
    except ValueError:
        valid = ", ".join(kind.value for kind in ScheduleKind)
        fail(f"--kind {value!r}: not one of {valid}")


def report_problems(source: str, problems: tuple[ConfigProblem, ...]) -> None:
    """List problems on stderr, one a line, in file order (see :func:`in_file_order`)."""
    noun = "problem" if len(problems) == 1 else "problems"
    print(f"{source}: {len(problems)} {noun}:", file=sys.stderr)
    for problem in in_file_order(problems):
        print(f"  - {problem}", file=sys.stderr)


def in_file_order(problems: tuple[ConfigProblem, ...]) -> list[ConfigProblem]:
    """``problems`` by file (in the order the files are first named) and line; those with no
    line come after their file's others, and those with no file last, each in the order
    found (the sort is stable)."""
    files: dict[str | None, int] = {}
    for problem in problems:
        if problem.source is not None:
            files.setdefault(problem.source, len(files))

    def place(problem: ConfigProblem) -> tuple[int, int, int]:
        rank = files.get(problem.source, len(files))
        line = problem.line
        return (rank, line is None, line or 0)

    return sorted(problems, key=place)


def load(path: Path, strict: bool = True) -> SchedulingConfig:
    """Load a configuration; unreadable: exit 2; invalid: list the problems and exit 1."""
    try:
        return SchedulingConfig.from_file(path, strict=strict)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    except ConfigError as exc:
        report_problems(str(path), exc.problems)
        raise typer.Exit(EXIT_INVALID) from None


def human(value: timedelta) -> str:
    """A duration for people: ``800ms``, ``1.2s``, ``30m 10s``, ``1d 2h``."""
    micros = value // timedelta(microseconds=1)
    if micros < 1_000_000:
        return format_duration(value)
    seconds, fraction = divmod(micros, 1_000_000)
    parts = []
    for suffix, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{suffix}")
    if seconds or fraction:
        parts.append(format_duration(timedelta(seconds=seconds, microseconds=fraction)))
    return " ".join(parts)
