"""pytest-asyncio's ``asyncio_default_fixture_loop_scope``, set for a project that sets none.

pytest-asyncio (installed with ``flowsched[testing]`` for the async fixtures) warns at every
run of a project that leaves the option unset: "asyncio_default_fixture_loop_scope is unset",
a ``PytestDeprecationWarning``, which fails a run under ``-W error``. A user who installed
flowsched's test kit did not choose pytest-asyncio, so the kit chooses for them:
``"function"``, the default pytest-asyncio announces, and the scope of every fixture of the
kit. A value the project sets (ini file or ``-o``) is never changed.
"""

from __future__ import annotations

import pytest

__all__ = ["OPTION", "default_loop_scope"]

OPTION = "asyncio_default_fixture_loop_scope"
DEFAULT = "function"


def default_loop_scope(config: pytest.Config) -> None:
    """Give ``OPTION`` the value ``"function"`` in ``config`` when it is unset; nothing when
    it is set or pytest-asyncio is not installed (the option is then not registered)."""
    try:
        value = config.getini(OPTION)
    except ValueError:  # pytest-asyncio is not installed: nothing reads the option
        return
    if value:
        return
    # pytest reads an option once and caches it: pytest-asyncio then reads this value. (No
    # public call sets an option's value after the ini files have been read.)
    cache = getattr(config, "_inicache", None)
    if isinstance(cache, dict):
        cache[OPTION] = DEFAULT
