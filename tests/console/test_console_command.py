"""``flowsched console``: its options, defaults (127.0.0.1:8765, read-only) and errors."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from flowsched.cli import build_app

uvicorn = pytest.importorskip("uvicorn")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``uvicorn.run`` was asked to serve (nothing is served)."""
    seen: dict[str, Any] = {}

    def run(application: Any, host: str, port: int, **options: Any) -> None:
        seen.update(app=application, host=host, port=port, options=options)

    monkeypatch.setattr(uvicorn, "run", run)
    return seen


def invoke(*args: str) -> Any:
    return CliRunner().invoke(build_app(), ["console", *args], catch_exceptions=False)


def test_help_lists_the_contract_options() -> None:
    result = invoke("--help")
    for option in ["--uri", "--database", "--collection", "--host", "--port", "--token-file"]:
        assert option in result.output


def test_defaults_bind_this_machine_read_only(served: dict[str, Any]) -> None:
    result = invoke("--uri", "mongodb://ops:pa55word-xyz@db1:27017/")
    assert result.exit_code == 0, result.output
    assert (served["host"], served["port"]) == ("127.0.0.1", 8765)
    assert "read-only" in result.output and "ops:***@db1" in result.output
    assert "pa55word-xyz" not in result.output


def test_options_reach_the_app(served: dict[str, Any], tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("a-long-operator-token\n")
    token.chmod(0o600)
    result = invoke(
        "--uri", "mongodb://db1/", "--database", "shop", "--collection", "jobs",
        "--host", "0.0.0.0", "--port", "9000", "--token-file", str(token),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (served["host"], served["port"]) == ("0.0.0.0", 9000)
    assert "shop.jobs" in result.output and "sign-in needed" in result.output
    assert "warning" not in result.output


def test_a_missing_token_file_is_a_usage_error(served: dict[str, Any]) -> None:
    result = invoke("--uri", "mongodb://db1/", "--token-file", "/nonexistent/token")
    assert result.exit_code == 2 and "/nonexistent/token" in result.output
    assert not served


def test_an_invalid_uri_is_a_usage_error_without_its_password(served: dict[str, Any]) -> None:
    result = invoke("--uri", "mongodb://ops:pa55word-xyz@")
    assert result.exit_code == 2
    assert "pa55word-xyz" not in result.output


def test_timeout_sets_the_query_budget(served: dict[str, Any]) -> None:
    assert invoke("--uri", "mongodb://db1/", "--timeout", "30s").exit_code == 0
    bad = invoke("--uri", "mongodb://db1/", "--timeout", "soon")
    assert bad.exit_code == 2 and "--timeout 'soon'" in bad.output


def test_a_non_loopback_bind_needs_an_identity(served: dict[str, Any]) -> None:
    refused = invoke("--uri", "mongodb://db1/", "--host", "0.0.0.0")
    assert refused.exit_code == 2 and "--insecure-open" in refused.output and not served
    opened = invoke("--uri", "mongodb://db1/", "--host", "0.0.0.0", "--insecure-open")
    assert opened.exit_code == 0 and served["host"] == "0.0.0.0"
    # uvicorn would believe X-Forwarded-For from 127.0.0.1; the console decides itself.
    assert served["options"]["proxy_headers"] is False
    assert served["options"]["access_log"] is False


def test_a_loopback_bind_serves_the_loopback_names_only(served: dict[str, Any]) -> None:
    from starlette.testclient import TestClient

    assert invoke("--uri", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100").exit_code == 0
    console = TestClient(served["app"])
    assert console.get("/login", headers={"host": "attacker.example"}).status_code == 400
    assert console.get("/static/console.css", headers={"host": "localhost:8765"}).status_code == 200


def test_hash_secret_reads_standard_input_and_the_users_file_takes_it(
    served: dict[str, Any], tmp_path: Any
) -> None:
    from flowsched.console.identity import verify_secret

    made = CliRunner().invoke(build_app(), ["console", "hash-secret"], input="s3cret-enough\n")
    assert made.exit_code == 0, made.output
    hashed = made.output.strip()
    assert hashed.startswith("scrypt$") and verify_secret("s3cret-enough", hashed)
    assert not verify_secret("s3cret-enougH", hashed)
    short = CliRunner().invoke(build_app(), ["console", "hash-secret"], input="short\n")
    assert short.exit_code == 2 and "8 characters" in short.output
    users = tmp_path / "users"
    users.write_text(f"# the operators\nalice:operator:{hashed}\n")
    result = invoke("--uri", "mongodb://db1/", "--users-file", str(users), "--host", "0.0.0.0")
    assert result.exit_code == 0 and "can be read by other users" in result.output
    users.write_text("alice:admin:" + hashed)
    bad = invoke("--uri", "mongodb://db1/", "--users-file", str(users))
    assert bad.exit_code == 2 and "line 1" in bad.output and "viewer or operator" in bad.output


def test_the_help_lists_the_production_options() -> None:
    result = invoke("--help")
    options = ["--config", "--users-file", "--trusted-proxy", "--user-header", "--allowed-host",
               "--insecure-open", "--hide-payloads", "--session-ttl"]  # fmt: skip
    for option in options:
        assert option in result.output, option
