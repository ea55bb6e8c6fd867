"""Griffe extension for ``make docs``: render the docstrings' reST bits as Markdown.

flowsched's docstrings are written for ``help()`` and doctest: ``>>>`` examples, Sphinx roles
(:class:`~flowsched.port.ScheduleItem`) and ``::`` literal blocks. mkdocstrings renders
docstrings as Markdown, where ``>>>`` lines would run together into a paragraph. This
extension, loaded from ``mkdocs.yml``, fences the examples as ``pycon`` code and turns roles
into inline code, without changing the source.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _fence_examples(text: str) -> str:
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out.extend(["```pycon", *block, "```"])
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def to_markdown(text: str) -> str:
    """The docstring ``text`` with examples fenced, roles as code, ``::`` as ``:``."""
    text = _fence_examples(text)
    text = _ROLE.sub(_role, text)
    return re.sub(r"(?m)(\S)::$", r"\1:", text)


class ReSTToMarkdown(griffe.Extension):
    """Rewrite every docstring as it is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
