"""The PostgreSQL guide's Python blocks run, on the test server instead of ``db``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from flowsched.postgres import PostgresTimerStore

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "postgres.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


def test_the_guides_blocks_run_on_the_test_server(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    blocks = _blocks()
    assert len(blocks) == 2
    timers, flows = fresh_table(), fresh_table()
    for block in blocks:
        code = (
            block.replace('"postgresql://app@db/app"', repr(postgres_url))
            .replace('node_id="web-1")', f'node_id="web-1", table={timers!r})')
            .replace("PostgresScheduler(url)", f"PostgresScheduler(url, table={timers!r})")
            .replace("PostgresFlowStore(url)", f"PostgresFlowStore(url, table={flows!r})")
        )
        namespace: dict[str, object] = {}
        exec(compile(code, str(GUIDE), "exec"), namespace)
        if "domain" in namespace:  # the second block: its scheduler is left open
            namespace["scheduler"].close()  # type: ignore[attr-defined]
    with PostgresTimerStore(postgres_url, table=timers) as store:
        assert store.exists("expire-o-1"), "the first block's timer was not stored"
