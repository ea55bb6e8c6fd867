"""docs/guides/asyncio.md stays true: its async test runs as a user would run it (a
directory of its own, no conftest: the ``pytest11`` plugin serves the async fixtures)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "asyncio.md"


def test_the_guides_async_test_passes_as_a_users_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLOWSCHED_MONGO_URI", raising=False)
    monkeypatch.delenv("FLOWSCHED_POSTGRES_URL", raising=False)  # as a new user: no server
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    tests = [block for block in blocks if "async def test_" in block]
    assert len(tests) == 1, "the guide's async test changed: update this test"
    pytester.makepyfile(test_guide=tests[0])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)  # async_scheduler: in memory, then MongoDB (mongomock)


SNIPPET_CONFIG = """
Payment.CheckingFraud.CheckFraud.timeout-duration = 20s
ipf-scheduler.mongodb {
  uri = ${?FLOWSCHED_MONGO_URI}
  database-name = ${?FLOWSCHED_SCHEDULER_DATABASE}
  collection = "timers"
}
"""


def fastapi_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    snippets = [block for block in blocks if "FastAPI(lifespan=lifespan)" in block]
    assert len(snippets) == 1, "the guide's FastAPI snippet changed: update this test"
    return snippets[0]


@pytest.mark.wire
def test_the_guides_fastapi_snippet_runs_as_written(
    mongo_db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snippet, pasted into a module of a project whose config/application.conf names the
    database, serves a payment: every name it uses comes from an import it shows."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "application.conf").write_text(SNIPPET_CONFIG, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLOWSCHED_SCHEDULER_DATABASE", mongo_db.name)
    service: dict[str, Any] = {"__name__": "payments_service"}
    exec(compile(fastapi_snippet(), "asyncio.md", "exec"), service)
    with TestClient(service["app"]) as client:
        response = client.post("/payments/p-1")
    assert response.status_code == 201, response.text
    assert response.json() == {"id": "p-1", "state": "CheckingFraud"}
    stored = mongo_db["payments"].find_one({"_id": "p-1"})
    assert stored is not None and stored["version"] >= 1
