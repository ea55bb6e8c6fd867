"""The flowsched command: explain, check and backoff, with their exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from flowsched.cli import build_app

EXAMPLE = str(Path(__file__).resolve().parents[1] / "config" / "application.conf")
runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(build_app(), list(args))
    return result.exit_code, result.stdout, result.stderr


def rows(table: str) -> list[list[str]]:
    """The cells of each row of a rich table (box-drawing borders removed)."""
    return [
        [cell.strip() for cell in line.strip("│┃ ").split("│")]
        for line in table.splitlines()
        if line.startswith("│")
    ]


def test_explain_shows_the_winning_key_of_each_type() -> None:
    code, out, _ = run("explain", EXAMPLE, "OBCreditTransfer", "CheckingFraud", "CheckFraud")
    assert code == 0
    table = {row[0]: row for row in rows(out) if row[0]}
    assert table["timeout-duration"][1:3] == [
        "2h",
        "ipf.flow.OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration",
    ]
    assert table["timeout-duration"][3] == (
        "OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration"
    )
    assert table["custom-backoffs"][1:3] == [
        "[10s, 30m]",
        "Any.CheckingFraud.CheckFraud.custom-backoffs",
    ]
    assert table["initial-retry-interval"][1:3] == ["1s", "default"]
    assert "USER_DEFINED [10s, 30m] x4, no jitter" in out


def test_explain_as_json() -> None:
    code, out, _ = run(
        "explain", EXAMPLE, "OBCreditTransfer", "ValidatingSchemeRules",
        "ValidateAgainstSchemeRules", "--json",
    )  # fmt: skip
    assert code == 0
    types = json.loads(out)["types"]
    assert types["timeout-duration"]["value"] == "15s"
    assert types["backoff-type"] == {
        "value": "LINEAR",
        "key": "OBCreditTransfer.Any.ValidateAgainstSchemeRules.backoff-type",
        "shadowed": [],
    }
    assert types["timeout-duration"]["shadowed"] == [
        "Any.Any.ValidateAgainstSchemeRules.timeout-duration",
        "Any.Any.Any.timeout-duration",
    ]


def test_check_passes_the_example_with_a_summary() -> None:
    code, out, err = run("check", EXAMPLE)
    assert (code, err) == (0, "")
    assert "OK" in out and "processing-time limits" in out


def test_check_names_a_near_miss_key_and_exits_1(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("akka.loglevel = INFO\nAny.Any.Any.timeout-duraton = 2s\n", encoding="utf-8")
    code, out, err = run("check", str(conf))
    assert code == 1
    assert out == ""
    assert "Any.Any.Any.timeout-duraton = 2s" in err
    assert "did you mean Any.Any.Any.timeout-duration?" in err


def test_check_lists_every_error(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("F.S.A.max-retries = -1\nF.S.A.backoff-type = SOMETIMES\n", encoding="utf-8")
    code, _, err = run("check", str(conf))
    assert code == 1
    assert "2 problems" in err
    assert "F.S.A.max-retries = -1" in err and 'F.S.A.backoff-type = "SOMETIMES"' in err


def test_an_unreadable_file_is_one_line_on_stderr_and_exit_2(tmp_path: Path) -> None:
    code, out, err = run("check", str(tmp_path / "missing.conf"))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("flowsched: error: cannot read")


def test_a_file_that_is_not_utf8_is_a_problem_naming_the_file_and_line(tmp_path: Path) -> None:
    conf = tmp_path / "latin1.conf"
    conf.write_bytes("# café\nAny.Any.Any.timeout-duration = 1s\n".encode("latin-1"))

    for verb in (("check", str(conf)), ("explain", str(conf), "F", "S", "A")):
        code, out, err = run(*verb)
        assert (code, out) == (1, "")
        assert f"{conf}:1: not UTF-8 text (byte 0xe9 at offset 5, line 1)" in err


def test_backoff_previews_linear_waits_and_cumulative_times() -> None:
    code, out, _ = run("backoff", "--type", "LINEAR", "--initial", "1000", "--max-retries", "4")
    assert code == 0
    table = rows(out)
    assert [row[:3] for row in table] == [
        ["1", "1s", "1s"],
        ["2", "2s", "3s"],
        ["3", "3s", "6s"],
        ["4", "4s", "10s"],
    ]
    assert table[0][3] == "800ms .. 1.2s"  # jitter is on by default: +/-20%
    assert table[3][4] == "8s .. 12s"


def test_backoff_without_jitter_and_with_a_timeout() -> None:
    code, out, _ = run("backoff", "--max-retries", "5", "--no-jitter", "--timeout", "10s")
    assert code == 0
    table = rows(out)
    assert [row[:3] for row in table] == [
        ["1", "1s", "1s"],
        ["2", "2s", "3s"],
        ["3", "4s", "7s"],
        ["4", "8s", "15s"],
        ["5", "16s", "31s"],
    ]
    assert [row[3] for row in table][2:4] == ["yes", "no: at or after the 10s timeout"]
    assert "with jitter" not in out


def test_backoff_user_defined_from_the_command_line() -> None:
    code, out, _ = run(
        "backoff", "--type", "USER_DEFINED", "--custom", "10s,30m", "--max-retries", "4",
        "--jitter-factor", "0",
    )  # fmt: skip
    assert code == 0
    assert [row[1] for row in rows(out)] == ["10s", "30m", "30m", "30m"]
    assert [row[2] for row in rows(out)][-1] == "1h 30m 10s"


def test_backoff_from_a_configuration_file_uses_its_policy_and_timeout() -> None:
    code, out, _ = run(
        "backoff", "--from", EXAMPLE, "OBCreditTransfer", "CheckingFraud", "CheckFraud"
    )
    assert code == 0
    assert out.splitlines()[0] == "USER_DEFINED [10s, 30m] x4, no jitter; timeout 2h"
    assert [row[2] for row in rows(out)] == ["10s", "30m 10s", "1h 10s", "1h 30m 10s"]


def test_backoff_bad_option_is_one_line_and_exit_2() -> None:
    code, _, err = run("backoff", "--initial", "-2s")
    assert code == 2
    assert err == 'flowsched: error: --initial "-2s": a duration cannot be negative\n'
    code, _, err = run("backoff", "--type", "FIBONACCI")
    assert code == 2 and "EXPONENTIAL, LINEAR, USER_DEFINED" in err
    code, _, err = run("backoff", "--type", "USER_DEFINED")
    assert code == 2 and "custom" in err


def test_the_console_script_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from flowsched.cli import main; main()", "check", EXAMPLE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout


def test_explain_on_an_invalid_file_lists_the_problems_and_exits_1(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("F.S.A.jitter-factor = 3\n", encoding="utf-8")
    code, out, err = run("explain", str(conf), "F", "S", "A")
    assert (code, out) == (1, "")
    assert "F.S.A.jitter-factor = 3: must be a number from 0 to 1" in err


def test_check_lists_a_misshapen_root_key_beside_a_bad_value(tmp_path: Path) -> None:
    # A bad value made the load fail first, and the missing level of line 2 went unreported.
    conf = tmp_path / "both.conf"
    conf.write_text("Pay.Fraud.Check.max-retries = -1\nPay.Fraud.max-retries = 3\n")
    code, _, err = run("check", str(conf))
    assert code == 1
    assert "2 problems" in err
    assert "both.conf:1: Pay.Fraud.Check.max-retries = -1" in err
    assert "both.conf:2: Pay.Fraud.max-retries = 3: 1 level missing" in err


def test_check_lists_problems_in_file_order(tmp_path: Path) -> None:
    # Bad values, near-miss keys and misshapen keys are found by different passes: they were
    # listed pass by pass (lines 2, 4, 3, 1), not as the file reads.
    conf = tmp_path / "mixed.conf"
    conf.write_text(
        "Pay.Fraud.max-retries = 3\n"
        "Pay.Fraud.Check.max-retries = -1\n"
        "Any.Any.Any.timeout-duraton = 2s\n"
        "F.S.A.backoff-type = SOMETIMES\n",
        encoding="utf-8",
    )
    code, _, err = run("check", str(conf))
    assert code == 1
    listed = [line for line in err.splitlines() if line.startswith("  - ")]
    assert [line.split(":")[1] for line in listed] == ["1", "2", "3", "4"]
