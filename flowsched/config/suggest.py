"""Internal: closest valid names for a misspelt one (the "did you mean" of config errors).

Matching ignores case, ``_`` versus ``-`` and camelCase (``maxRetries``, ``Max_Retries`` and
``max-retries`` are one word), knows the words people write instead of a type name
(``timeout``, ``retries``, ``jitter``, ``backoff``), and only then falls back on spelling
distance and shared words.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

__all__ = ["closest", "is_near", "normal"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def normal(word: str) -> str:
    """``word`` in lower kebab case: ``maxRetries`` and ``MAX_RETRIES`` → ``max-retries``."""
    return _CAMEL.sub("-", word).lower().replace("_", "-").replace(" ", "-")


def is_near(word: str, candidates: Iterable[str], cutoff: float = 0.8) -> str | None:
    """The candidate ``word`` is a near miss of (same up to case/spelling), if any."""
    found = normal(word)
    names = {normal(c): c for c in candidates}
    if found in names:
        return names[found]
    matches = difflib.get_close_matches(found, sorted(names), n=1, cutoff=cutoff)
    return names[matches[0]] if matches else None


def closest(
    word: str,
    candidates: Iterable[str],
    aliases: Mapping[str, str] | None = None,
    cutoff: float = 0.6,
    *,
    shared_words: bool = True,
) -> str | None:
    """The candidate most likely meant by ``word``, or ``None`` if nothing is close.

    ``shared_words``: as a last resort, the candidate sharing most words with ``word``
    (``enabled`` → ``jitter-enabled``): good for a suggestion, too loose to decide whether
    a key is meant as one of ours."""
    names = {normal(c): c for c in candidates}
    found = normal(word)
    if found in names:
        return names[found]
    meant = (aliases or {}).get(found)
    if meant is not None and meant in names.values():
        return meant
    matches = difflib.get_close_matches(found, sorted(names), n=1, cutoff=cutoff)
    if matches:
        return names[matches[0]]
    if not shared_words:
        return None
    words = set(found.split("-")) - {""}
    shared = [(len(words & set(n.split("-"))), n) for n in names]
    best = max(shared, default=(0, ""), key=lambda pair: pair[0])
    return names[best[1]] if best[0] else None
