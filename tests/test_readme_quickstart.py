"""The README's quickstart runs as pasted, from an empty directory, and prints what it shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart() -> tuple[str, str]:
    """The quickstart's code and the output the README says it prints."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quickstart") :]
    section = section[: section.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    output = re.search(r"It prints:\n\n```text\n(.*?)```", section, re.S)
    assert code is not None and output is not None, "the quickstart lost its code or output"
    return code.group(1), output.group(1)


def test_the_quickstart_prints_what_the_readme_shows(tmp_path: Path) -> None:
    code, expected = quickstart()
    script = tmp_path / "quickstart.py"
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
        assert target.removeprefix("docs/") in nav, f"{target} is not in mkdocs.yml's nav"
