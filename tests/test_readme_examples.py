"""The README's Python blocks (the quickstart, timed actions) run as pasted, from an empty
directory, and print what the README shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def pasteable_blocks() -> list[tuple[str, str]]:
    """Each Python block of the README with the output the README says it prints."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```\n\nIt prints[^\n]*:\n\n```text\n(.*?)```", text, re.S)
    assert len(blocks) == text.count("```python"), "a Python block of the README shows no output"
    return blocks


def test_the_quickstart_and_the_timed_actions_are_pasteable() -> None:
    text = README.read_text(encoding="utf-8")
    for section in ("## Quickstart", "## Timed actions"):
        body = text[text.index(section) :]
        assert "```python" in body[: body.index("\n## ", 1)], f"{section} lost its code"


@pytest.mark.parametrize("block", range(len(pasteable_blocks())))
def test_a_readme_block_prints_what_the_readme_shows(block: int, tmp_path: Path) -> None:
    code, expected = pasteable_blocks()[block]
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected


def test_the_readme_stays_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail to docs/"


def test_the_readme_links_only_to_pages_of_the_docs_site() -> None:
    """Every link is a relative docs/*.md link (a repository browser opens it) to a page in
    mkdocs.yml's nav, whose pages ``make docs`` (--strict) requires to exist."""
    text = README.read_text(encoding="utf-8")
    mkdocs = (README.parent / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r":\s+(\S+\.md)\s*$", mkdocs, re.M))
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert targets, "the README links to no documentation page"
    for target in targets:
        assert target.startswith("docs/"), target
        page, _, anchor = target.partition("#")
        assert page.removeprefix("docs/") in nav, f"{target} is not in mkdocs.yml's nav"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (README.parent / page).read_text("utf-8"), re.M)
            assert anchor in {_slug(heading) for heading in headings}, f"no heading {target}"


def _slug(heading: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)
