"""``flowsched check --flows``, ``explain`` warnings, and errors naming the file and line."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowsched.cli import build_app

runner = CliRunner()

FLOWS_MODULE = """
from flowsched import Flow

class Done:
    pass

def _flow(name):
    return (
        Flow(name)
        .initial("CheckingFraud", invokes="CheckFraud")
        .terminal("Complete")
        .response(Done, to="CheckFraud")
        .on(Done, in_state="CheckingFraud", go_to="Complete")
    )

ONE = _flow("OBCreditTransfer")
MANY = [_flow("OBCreditTransfer"), _flow("Refund")]

def all_flows():
    return MANY

NOT_FLOWS = 42
"""


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(build_app(), list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def flows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of an importable module (in the current directory) defining flows."""
    name = f"flows_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(FLOWS_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def conf(tmp_path: Path, text: str) -> str:
    path = tmp_path / "application.conf"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("attr", ["ONE", "MANY", "all_flows"])
def test_check_flows_accepts_a_flow_a_list_or_a_callable(
    tmp_path: Path, flows: str, attr: str
) -> None:
    path = conf(tmp_path, "Any.CheckingFraud.CheckFraud.max-retries = 2\n")

    code, out, err = run("check", path, "--flows", f"{flows}:{attr}")

    assert (code, err) == (0, "")
    assert "OK: 1 action keys" in out
    assert "checked against flows OBCreditTransfer" in out


def test_check_flows_reports_an_unknown_state_with_the_file_line_and_suggestion(
    tmp_path: Path, flows: str
) -> None:
    path = conf(tmp_path, "# fraud\nAny.CheckingFruad.CheckFraud.max-retries = 2\n")

    code, out, err = run("check", path, "--flows", f"{flows}:MANY")

    assert (code, out) == (1, "")
    assert f"{path}:2: Any.CheckingFruad.CheckFraud.max-retries: no state 'CheckingFruad'" in err
    assert "did you mean 'CheckingFraud'?" in err


def test_check_flows_reports_a_root_key_of_a_registered_flow_that_does_not_fit(
    tmp_path: Path, flows: str
) -> None:
    path = conf(
        tmp_path,
        "OBCreditTransfer.CheckingFraud.timeout-duration = 2s\n"
        "Kafka.Consumer.Group.max-retries = 3\n",  # not a flow: somebody else's key
    )

    code, _, err = run("check", path, "--flows", f"{flows}:ONE")

    assert code == 1
    assert f"{path}:1: OBCreditTransfer.CheckingFraud.timeout-duration = 2s" in err
    assert "did you mean OBCreditTransfer.CheckingFraud.Any.timeout-duration?" in err
    assert "Kafka" not in err


def test_without_flows_check_reports_flow_shaped_root_keys_that_do_not_fit(
    tmp_path: Path,
) -> None:
    path = conf(tmp_path, "OBCreditTransfer.CheckingFraud.CheckFraud.retries = 2\n")

    code, _, err = run("check", path)

    assert code == 1
    assert "did you mean OBCreditTransfer.CheckingFraud.CheckFraud.max-retries?" in err


def test_check_fails_when_no_flow_shaped_key_is_recognised(tmp_path: Path, flows: str) -> None:
    path = conf(tmp_path, "Kafka.Consumer.Group.retries = 3\n")

    code, _, err = run("check", path, "--flows", f"{flows}:ONE")

    assert code == 1
    assert "1 key(s) look like flow keys but none is one" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected MODULE:ATTR"),
        ("flows_that_do_not_exist_x:ONE", "cannot import flows_that_do_not_exist_x"),
        ("{module}:MISSING", "has no attribute 'MISSING'"),
        ("{module}:NOT_FLOWS", "expected a Flow, a list of Flows or a callable"),
    ],
)
def test_a_bad_flows_option_is_a_usage_error(
    tmp_path: Path, flows: str, spec: str, message: str
) -> None:
    path = conf(tmp_path, "Any.Any.Any.max-retries = 1\n")

    code, _, err = run("check", path, "--flows", spec.format(module=flows))

    assert code == 2
    assert message in err


def test_explain_warns_when_no_key_mentions_the_names_asked(tmp_path: Path) -> None:
    path = conf(
        tmp_path,
        "OBCreditTransfer.CheckingFraud.CheckFraud.max-retries = 2\nAny.Any.Any.max-retries = 1\n",
    )

    code, out, err = run("explain", path, "OBCreditTransfer", "CheckingFruad", "checkfraud")

    assert code == 0
    assert "max-retries" in out
    assert "mentions state 'CheckingFruad' (did you mean 'CheckingFraud'?)" in err
    assert "mentions action 'checkfraud' (did you mean 'CheckFraud'?)" in err
    assert "flow 'OBCreditTransfer'" not in err


def test_explain_is_quiet_when_every_name_is_mentioned(tmp_path: Path) -> None:
    path = conf(tmp_path, "OBCreditTransfer.CheckingFraud.CheckFraud.max-retries = 2\n")

    code, _, err = run("explain", path, "OBCreditTransfer", "CheckingFraud", "CheckFraud")

    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("text", "line", "shown"),
    [
        ("Any.Any.Any.max-retries = 1\nipf.flow {\n  F.S.A.max-retries = 2\n\n", 2, "ipf.flow {"),
        ("a = 1\nb = }\nc = 3\n", 2, "b = }"),
        ("a = 1\nlist = [1, 2\n", 2, "list = [1, 2"),
    ],
)
def test_a_syntax_error_names_the_file_and_line_and_shows_it(
    tmp_path: Path, text: str, line: int, shown: str
) -> None:
    path = conf(tmp_path, text)

    for verb in (("check", path), ("explain", path, "F", "S", "A")):
        code, out, err = run(*verb)
        assert (code, out) == (1, "")
        assert f"{path}:{line}: not valid HOCON at line" in err
        assert shown in err


def test_a_wrong_key_in_a_file_is_reported_with_its_line(tmp_path: Path) -> None:
    path = conf(tmp_path, "akka.loglevel = INFO\n\nipf.flows.F.S.A.max-retries = 1\n")

    code, _, err = run("check", path)

    assert code == 1
    assert f"{path}:3: ipf.flows.F.S.A.max-retries = 1: ipf.flows is not read" in err


def test_a_file_of_library_keys_only_passes_check(tmp_path: Path) -> None:
    path = conf(tmp_path, "mylib.client.retries = 5\nakka.loglevel = INFO\n")

    code, out, err = run("check", path)

    assert (code, err) == (0, "")
    assert "OK: 0 action keys" in out


NEW_USER_FILE = """
OBCreditTransfer.CheckingFraud.CheckFraud {
  jitter = false
  retries = 5
  timeout = 30s
  backoff = LINEAR
}
OBCreditTransfer.CheckFraud.max-retries = 2
OBCreditTransfer.CheckingFraud.CheckFraud.Retry.max-retries = 2
OBCreditTransfer.CheckingFraud.processing-time.Complete.timeout-duration = 1m
ipf.flows.OBCreditTransfer.CheckingFraud.CheckFraud.max-retries = 2
"""


def test_a_file_of_plausible_but_wrong_keys_fails_check_naming_each(tmp_path: Path) -> None:
    path = conf(tmp_path, NEW_USER_FILE)

    code, out, err = run("check", path)

    assert (code, out) == (1, "")
    for line, fix in [
        (3, "OBCreditTransfer.CheckingFraud.CheckFraud.jitter-enabled"),
        (4, "OBCreditTransfer.CheckingFraud.CheckFraud.max-retries"),
        (5, "OBCreditTransfer.CheckingFraud.CheckFraud.timeout-duration"),
        (6, "OBCreditTransfer.CheckingFraud.CheckFraud.backoff-type"),
        (8, "OBCreditTransfer.Any.CheckFraud.max-retries"),
        (9, "OBCreditTransfer.CheckingFraud.CheckFraud.max-retries"),
        (10, "ipf.flow.OBCreditTransfer.processing-time.CheckingFraud.Complete.timeout-duration"),
        (11, "ipf.flow.OBCreditTransfer.CheckingFraud.CheckFraud.max-retries"),
    ]:
        assert f"{path}:{line}: " in err
        assert f"did you mean {fix}?" in err
    assert "8 problems" in err


def test_a_syntax_error_never_spells_out_the_parser_grammar(tmp_path: Path) -> None:
    path = conf(tmp_path, '"ipf-scheduler".flowsched.lease = 5s\n')

    code, out, err = run("check", path)

    assert (code, out) == (1, "")
    assert f"{path}:1: not valid HOCON at line 1, column 16" in err
    assert '"ipf-scheduler".flowsched.lease = 5s' in err
    assert len(err) < 400, err
