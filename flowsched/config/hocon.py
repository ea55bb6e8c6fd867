"""Internal: reads HOCON with pyhocon, keeps what pyhocon would lose, flattens it to keys.

pyhocon converts duration literals while it parses and truncates nanoseconds on the way
(``5ns`` becomes ``timedelta(0)``, ``1500ns`` one microsecond). :func:`parse_hocon` quotes
nanosecond literals before pyhocon sees them, so they reach
:func:`~flowsched.durations.parse_duration` as text and are rounded, or rejected, there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pyhocon import ConfigFactory, ConfigTree
from pyhocon.exceptions import ConfigException
from pyparsing import ParseBaseException

from flowsched.errors import ConfigError

__all__ = ["flatten", "format_key", "load_hocon", "parse_hocon"]

# Strings and comments are copied as they are; an unquoted nanosecond literal (the same shape
# pyhocon's duration grammar matches: digits, optional spaces, unit, end of word) is quoted.
_NANOS_OR_SKIP = re.compile(
    r'(?P<skip>"""[\s\S]*?"""+|"(?:[^"\\\n]|\\.)*"|(?:#|//)[^\n]*)'
    r"|(?<![\w.+\-$])(?P<nanos>\d+ *(?:nanoseconds|nanosecond|nanos|nano|ns))(?![\w])"
)
_PLAIN_KEY_PART = re.compile(r"[A-Za-z0-9_-]+")


def _quote_nanos(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        nanos = match["nanos"]
        return f'"{nanos}"' if nanos else match[0]

    return _NANOS_OR_SKIP.sub(replace, text)


def parse_hocon(text: str, basedir: str | None = None, source: str = "<string>") -> ConfigTree:
    """Parse HOCON text with substitutions resolved, keeping nanosecond literals as text.

    Syntax errors and unresolved substitutions raise :class:`ConfigError` with the line and
    column. ``include`` d files are parsed by pyhocon directly (their nanoseconds truncated).
    """
    try:
        tree = ConfigFactory.parse_string(_quote_nanos(text), basedir=basedir)
    except ParseBaseException as exc:
        # pyparsing's own message spells out the whole grammar: show the line instead.
        raise ConfigError.single(
            f"{source}: not valid HOCON at line {exc.lineno}, column {exc.col}: "
            f"{exc.line.strip()!r}"
        ) from None
    except ConfigException as exc:
        raise ConfigError.single(f"{source}: {exc}") from None
    if not isinstance(tree, ConfigTree):  # a file whose root is a list
        raise ConfigError.single(f"{source}: the root must be an object, not a list")
    return tree


def load_hocon(path: str | Path) -> ConfigTree:
    """Read and parse a HOCON file (see :func:`parse_hocon`). ``OSError`` if unreadable."""
    file = Path(path)
    text = file.read_text(encoding="utf-8")
    return parse_hocon(text, basedir=str(file.parent), source=str(path))


def flatten(
    tree: ConfigTree, stop_at: frozenset[str] = frozenset(), prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every leaf as ``(path parts, value)``; quotes around key parts are removed.

    A node whose last part is in ``stop_at`` is yielded as a leaf even when it is an object,
    so that ``timeout-duration { ... }`` is reported as a wrong type rather than skipped.
    """
    for raw_key, value in tree.items():
        part = _unquote(raw_key)
        path = (*prefix, part)
        if isinstance(value, ConfigTree) and part not in stop_at:
            yield from flatten(value, stop_at, path)
        else:
            yield path, value


def format_key(parts: tuple[str, ...]) -> str:
    """The HOCON key for ``parts``, quoting a part that holds a dot or other punctuation."""
    return ".".join(p if _PLAIN_KEY_PART.fullmatch(p) else f'"{p}"' for p in parts)


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] == '"':
        return key[1:-1]
    return key
