"""Internal: where each key of a HOCON text is written (its line, for error messages).

pyhocon keeps no positions in the tree it returns, so this module reads the text once more
with a small tokenizer that knows just enough HOCON (objects, arrays, quoted and unquoted
keys, comments, triple-quoted strings, ``include``) to follow the nesting. It never decides
what a file means: it only answers "on which line is the key ``a.b.c``?" and "which ``{``
or ``[`` is never closed?". A key it cannot place has no line, and messages then give the
file alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["KeyLines", "scan"]

_TOKEN = re.compile(
    r'(?P<triple>"""[\s\S]*?"""+)'
    r'|(?P<string>"(?:[^"\\\n]|\\.)*"?)'
    r"|(?P<comment>(?:#|//)[^\n]*)"
    r"|(?P<subst>\$\{[^}\n]*\}?)"
    r"|(?P<newline>\n)"
    r"|(?P<space>[ \t\r\f\v\ufeff]+)"
    r"|(?P<append>\+=)"
    r"|(?P<punct>[{}\[\],:=])"
    r"|(?P<word>(?:[^\s{}\[\],:=#\"$/]|/(?!/)|\$(?!\{))+)"
)


@dataclass(slots=True)
class _Frame:
    kind: str  # "object", "array" or "opaque" (an object inside an array: not addressable)
    prefix: tuple[str, ...]
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class KeyLines:
    """The line of every key found (``a.b.c`` → 3) and the bracket left open, if any."""

    lines: dict[tuple[str, ...], int] = field(default_factory=dict)
    unclosed: tuple[int, str] | None = None
    """``(line, text of that line)`` of the innermost ``{``/``[`` never closed."""

    def line_of(self, path: tuple[str, ...]) -> int | None:
        """The line where ``path`` (or, failing that, its nearest enclosing object) is set."""
        for end in range(len(path), 0, -1):
            found = self.lines.get(path[:end])
            if found is not None:
                return found
        return None


def scan(text: str) -> KeyLines:
    """Find the line of each key of ``text`` (see the module docstring)."""
    lines_of_text = text.split("\n")
    found: dict[tuple[str, ...], int] = {}
    stack = [_Frame("object", (), 0, "")]
    key: list[str] = []
    key_line = 0
    expecting_value = False
    in_value = False
    line = 1
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        token = match[0]
        top = stack[-1]
        if kind in ("space", "comment"):
            continue
        if kind == "triple":
            line += token.count("\n")
        if kind == "newline" or (kind == "punct" and token == ","):
            if expecting_value or in_value:
                expecting_value = in_value = False
                key = []
            line += kind == "newline"
            continue
        if top.kind != "object":
            if token in ("{", "["):
                stack.append(_Frame("opaque", (), line, lines_of_text[line - 1]))
            elif token in ("}", "]") and len(stack) > 1:
                stack.pop()
            continue
        if token == "}" and kind == "punct":
            if len(stack) > 1:
                stack.pop()
            key, expecting_value, in_value = [], False, False
            continue
        if in_value:
            if token in ("{", "["):  # a value such as `a = foo { ... }`: follow the nesting
                stack.append(_Frame("opaque", (), line, lines_of_text[line - 1]))
            continue
        if expecting_value or (token == "{" and key):
            path = (*top.prefix, *key)
            found[path] = key_line
            if token == "{":
                stack.append(_Frame("object", path, line, lines_of_text[line - 1]))
                key, expecting_value = [], False
            elif token == "[":
                stack.append(_Frame("array", path, line, lines_of_text[line - 1]))
                key, expecting_value = [], False
            else:
                expecting_value, in_value = False, True
            continue
        if (kind == "punct" and token in ("=", ":")) or kind == "append":
            expecting_value = bool(key)
            continue
        if kind == "word" and not key and token == "include":
            in_value = True  # skip the rest of the include statement
            continue
        if kind in ("word", "string"):
            if not key:
                key_line = line
            if kind == "string":
                key.append(token[1:-1] if len(token) >= 2 and token.endswith('"') else token[1:])
            else:
                key.extend(part for part in token.split(".") if part)
    unclosed = None
    if len(stack) > 1:
        frame = stack[-1]
        unclosed = (frame.line, frame.text.strip())
    return KeyLines(found, unclosed)
