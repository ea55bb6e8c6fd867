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
from typing import TYPE_CHECKING

from flowsched.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from pyhocon import ConfigTree
    from pyparsing import ParseBaseException

__all__ = ["flatten", "format_key", "load_hocon", "parse_hocon", "parse_key", "read_text"]

# Strings and comments are copied as they are; an unquoted nanosecond literal (the same shape
# pyhocon's duration grammar matches: digits, optional spaces, unit, end of word) is quoted.
_NANOS_OR_SKIP = re.compile(
    r'(?P<skip>"""[\s\S]*?"""+|"(?:[^"\\\n]|\\.)*"|(?:#|//)[^\n]*)'
    r"|(?<![\w.+\-$])(?P<nanos>\d+ *(?:nanoseconds|nanosecond|nanos|nano|ns))(?![\w])"
)
_PLAIN_KEY_PART = re.compile(r"[A-Za-z0-9_-]+")
# Strings and comments are skipped; the brackets outside them are counted.
_BRACKET_OR_SKIP = re.compile(r'"""[\s\S]*?"""+|"(?:[^"\\\n]|\\.)*"|(?:#|//)[^\n]*|[{}\[\]]')

MAX_DEPTH = 32
"""Deepest nesting of objects and lists read (pyhocon's parser recurses per level; a file
nested a few dozen deep would otherwise end in RecursionError)."""


_TOO_DEEP = "nested too deeply to read"


def _check_depth(text: str, source: str) -> None:
    depth = 0
    for match in _BRACKET_OR_SKIP.finditer(text):
        token = match[0]
        if token in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                message = f"objects and lists nest more than {MAX_DEPTH} deep"
                problem = ConfigProblem(None, None, message, source=source, line=line)
                raise ConfigError([problem])
        elif token in "}]":
            depth = max(0, depth - 1)


def _quote_nanos(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        nanos = match["nanos"]
        return f'"{nanos}"' if nanos else match[0]

    return _NANOS_OR_SKIP.sub(replace, text)


def parse_hocon(text: str, basedir: str | None = None, source: str = "<string>") -> ConfigTree:
    """Parse HOCON text with substitutions resolved, keeping nanosecond literals as text.

    Syntax errors and unresolved substitutions raise :class:`ConfigError` naming ``source``
    and the line, with the offending line shown (and, for a ``{`` or ``[`` never closed, the
    line that opened it). ``include`` d files are parsed by pyhocon directly (their
    nanoseconds truncated).
    """
    # pyhocon (and pyparsing) load here, when a configuration is read: the key helpers of this
    # module serve the schedulers' settings without them.
    from pyhocon import ConfigFactory, ConfigTree
    from pyhocon.exceptions import ConfigException
    from pyparsing import ParseBaseException

    _check_depth(text, source)
    try:
        tree = ConfigFactory.parse_string(_quote_nanos(text), basedir=basedir)
    except ParseBaseException as exc:
        raise ConfigError([_syntax_problem(text, source, exc)]) from None
    except ConfigException as exc:
        raise ConfigError([ConfigProblem(None, None, str(exc), source=source)]) from None
    except OSError as exc:  # an ``include required(...)`` file that cannot be read
        what = exc.strerror or type(exc).__name__
        message = f"an included file cannot be read: {exc.filename or exc}: {what}"
        raise ConfigError([ConfigProblem(None, None, message, source=source)]) from None
    except RecursionError:  # a shape the depth check does not see (an include, say)
        raise ConfigError([ConfigProblem(None, None, _TOO_DEEP, source=source)]) from None
    except (OverflowError, ValueError, TypeError, LookupError, AttributeError) as exc:
        # pyhocon's own conversions fail on some values (``99999999999999 days`` overflows
        # while parsing): still a mistake in the file, reported as one.
        message = f"cannot read: {type(exc).__name__}: {exc}"
        raise ConfigError([ConfigProblem(None, None, message, source=source)]) from None
    if not isinstance(tree, ConfigTree):  # a file whose root is a list
        raise ConfigError(
            [ConfigProblem(None, None, "the root must be an object, not a list", source=source)]
        )
    return tree


_LONGEST_WHAT = 120
"""Longer parser explanations are the grammar spelt out; the line and caret say more."""


def _syntax_problem(text: str, source: str, exc: ParseBaseException) -> ConfigProblem:
    # pyparsing's own message spells out the whole grammar: keep its first clause and show
    # the line instead.
    what = str(exc).split("  (at char", 1)[0].strip()
    what = what[:1].lower() + what[1:]
    if len(what) > _LONGEST_WHAT:  # the grammar itself, which says nothing to a reader
        what = "unexpected text here"
    lines = text.split("\n")
    line_no = exc.lineno
    message = f"not valid HOCON at line {line_no}, column {exc.col}: {what}"
    from flowsched.config.locations import scan

    unclosed = scan(text).unclosed
    if unclosed is not None and "end of text" in what:
        opened, opening = unclosed
        message += f"; the bracket opened at line {opened} is never closed: {opening}"
        line_no = opened
    else:
        shown = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
        if shown.strip():
            message += f"\n      {shown.rstrip()}\n      {' ' * (exc.col - 1)}^"
    return ConfigProblem(None, None, message, source=source, line=line_no)


def read_text(path: str | Path) -> str:
    """The text of a HOCON file. ``OSError`` if unreadable; :class:`ConfigError` naming the
    file if it is not UTF-8."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")  # a byte-order mark (some editors write one) is no text
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        message = (
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, line {line});"
            " HOCON files are UTF-8: convert it (iconv -f latin1 -t utf-8)"
        )
        raise ConfigError(
            [ConfigProblem(None, None, message, source=str(path), line=line)]
        ) from None


def load_hocon(path: str | Path) -> ConfigTree:
    """Read and parse a HOCON file (see :func:`parse_hocon`). ``OSError`` if unreadable."""
    return parse_hocon(read_text(path), basedir=str(Path(path).parent), source=str(path))


def flatten(
    tree: ConfigTree, stop_at: frozenset[str] = frozenset(), prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every leaf as ``(path parts, value)``; quotes around key parts are removed.

    A node whose last part is in ``stop_at`` is yielded as a leaf even when it is an object,
    so that ``timeout-duration { ... }`` is reported as a wrong type rather than skipped.
    """
    from pyhocon import ConfigTree

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


_KEY_PART = re.compile(r'"((?:[^"\\]|\\.)*)"|([^.]+)')


def parse_key(key: str) -> tuple[str, ...]:
    """The parts of a key :func:`format_key` wrote (``a."b.c"`` → ``("a", "b.c")``)."""
    return tuple(m[1] if m[1] is not None else m[2] for m in _KEY_PART.finditer(key))
