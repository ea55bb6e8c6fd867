"""docs/guides/console.md's option table names every option of ``flowsched console`` (it left
out ``--config``)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from flowsched.cli import build_app

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "console.md"


def test_the_option_table_names_every_option_of_the_console_command() -> None:
    group = typer.main.get_command(build_app())
    command = group.get_command(typer.Context(group), "console")  # type: ignore[attr-defined]
    options = {
        max(param.opts, key=len)
        for param in command.params
        if param.opts[0].startswith("--") and param.name != "help"
    }
    table = [
        line for line in GUIDE.read_text(encoding="utf-8").splitlines() if line.startswith("| `--")
    ]
    documented = {re.match(r"\| `(--[a-z-]+)", line).group(1) for line in table}  # type: ignore[union-attr]
    assert options - documented == set()
