"""Bad configuration fails at load time, names the key and the value, and lists every problem."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from flowsched import ConfigError, SchedulingConfig


def problems_of(text: str, *, strict: bool = True) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        SchedulingConfig.from_string(text, strict=strict)
    assert str(caught.value)  # the message is the list, ready to print
    return [str(problem) for problem in caught.value.problems]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("F.S.A.timeout-duration = -2s", 'F.S.A.timeout-duration = "-2s": a duration cannot be'),
        ("F.S.A.timeout-duration = soon", 'F.S.A.timeout-duration = "soon": not a duration'),
        ("F.S.A.timeout-duration = true", "F.S.A.timeout-duration = true: a boolean is not"),
        ("F.S.A.timeout-duration = [1s]", "F.S.A.timeout-duration = [1s]: expected a duration"),
        ("F.S.A.timeout-duration { a = 1 }", "F.S.A.timeout-duration = {...}: expected a"),
        ("F.S.A.timeout-duration = 5ns", 'F.S.A.timeout-duration = "5ns": shorter than 1 micro'),
        ("F.S.A.initial-retry-interval = -5", "F.S.A.initial-retry-interval = -5: a duration"),
        ("F.S.A.max-retries = -1", "F.S.A.max-retries = -1: must be a whole number >= 0"),
        ("F.S.A.max-retries = 2.5", "F.S.A.max-retries = 2.5: must be a whole number >= 0"),
        ("F.S.A.max-retries = many", 'F.S.A.max-retries = "many": must be a whole number'),
        ("F.S.A.max-retries = true", "F.S.A.max-retries = true: must be a whole number"),
        (
            "F.S.A.backoff-type = FIBONACCI",
            'F.S.A.backoff-type = "FIBONACCI": unknown backoff type; valid types are '
            "EXPONENTIAL, LINEAR, USER_DEFINED",
        ),
        ("F.S.A.custom-backoffs = []", "F.S.A.custom-backoffs = []: must not be empty"),
        ("F.S.A.custom-backoffs = 10s", "F.S.A.custom-backoffs = 10s: must be a list of dur"),
        (
            "F.S.A.custom-backoffs = [10s, -1s]",
            'F.S.A.custom-backoffs = [10s, "-1s"]: entry 2 ("-1s"): a duration cannot be neg',
        ),
        ("F.S.A.jitter-factor = 1.5", "F.S.A.jitter-factor = 1.5: must be a number from 0 to 1"),
        ("F.S.A.jitter-factor = -0.1", "F.S.A.jitter-factor = -0.1: must be a number from 0 to"),
        ("F.S.A.jitter-factor = lots", 'F.S.A.jitter-factor = "lots": must be a number from 0'),
        ("F.S.A.jitter-enabled = maybe", 'F.S.A.jitter-enabled = "maybe": must be true or false'),
        (
            "ipf.flow.F.S.A.max-retries = -3",
            "ipf.flow.F.S.A.max-retries = -3: must be a whole number >= 0",
        ),
    ],
)
def test_a_bad_value_names_its_key_and_value(line: str, expected: str) -> None:
    (problem,) = problems_of(line)
    assert problem.startswith(expected)


def test_user_defined_without_custom_backoffs_is_an_error() -> None:
    (problem,) = problems_of('F.S.A.backoff-type = "USER_DEFINED"')
    assert problem.startswith('F.S.A.backoff-type = "USER_DEFINED": USER_DEFINED needs custom')
    assert "F.S.A.custom-backoffs" in problem


def test_user_defined_finds_custom_backoffs_at_a_more_general_key() -> None:
    config = SchedulingConfig.from_string(
        """
        F.S.A.backoff-type = USER_DEFINED
        Any.Any.Any.custom-backoffs = [10s, 1m]
        """
    )
    assert config.action("F", "S", "A").retry.delays() == []  # max-retries defaults to 0
    assert config.action("F", "S", "A").retry.custom_backoffs == (
        timedelta(seconds=10),
        timedelta(minutes=1),
    )


def test_user_defined_for_every_action_needs_custom_backoffs_for_every_action() -> None:
    # Any.Any.Any applies to actions that F.S.A's custom-backoffs does not cover.
    (problem,) = problems_of(
        """
        Any.Any.Any.backoff-type = USER_DEFINED
        F.S.A.custom-backoffs = [10s]
        """
    )
    assert problem.startswith('Any.Any.Any.backoff-type = "USER_DEFINED"')


def test_user_defined_is_checked_on_the_resolved_policy_not_key_by_key() -> None:
    # backoff-type from level 8 and custom-backoffs from level 8 under the other form.
    config = SchedulingConfig.from_string(
        """
        Any.Any.Any.backoff-type = USER_DEFINED
        ipf.flow.Any.Any.Any.custom-backoffs = [2s]
        F.S.A.max-retries = 2
        """
    )
    assert config.action("F", "S", "A").retry.delays() == [timedelta(seconds=2)] * 2


def test_every_problem_is_reported_at_once() -> None:
    problems = problems_of(
        """
        F.S.A.max-retries = -1
        F.S.A.jitter-factor = 2
        Any.Any.Any.timeout-duraton = 2s
        ipf.flow.F.processing-time.A.B.timeout-duration = -1s
        """
    )
    assert len(problems) == 4
    for key in (
        "F.S.A.max-retries",
        "F.S.A.jitter-factor",
        "Any.Any.Any.timeout-duraton",
        "ipf.flow.F.processing-time.A.B.timeout-duration",
    ):
        assert any(problem.startswith(key) for problem in problems), key


def test_the_error_message_lists_the_problems_and_they_are_also_a_list() -> None:
    with pytest.raises(ConfigError) as caught:
        SchedulingConfig.from_string("F.S.A.max-retries = -1\nF.S.A.jitter-factor = 2")
    assert str(caught.value).splitlines()[0] == "2 problems in the scheduling configuration:"
    assert [p.key for p in caught.value.problems] == ["F.S.A.max-retries", "F.S.A.jitter-factor"]
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("line", "meant"),
    [
        ("F.S.A.timeout-duraton = 2s", "F.S.A.timeout-duration"),
        ("F.S.A.max-retry = 2", "F.S.A.max-retries"),
        ("F.S.A.backof-type = LINEAR", "F.S.A.backoff-type"),
        ("F.S.A.max_retries = 2", "F.S.A.max-retries"),
        ("F.S.A.jitterfactor = 0.1", "F.S.A.jitter-factor"),
        ("F.S.A.custom-backoff = [1s]", "F.S.A.custom-backoffs"),
        ("ipf.flow.F.S.A.initial-interval = 1s", "ipf.flow.F.S.A.initial-retry-interval"),
        ("any.S.A.max-retries = 2", "Any.S.A.max-retries"),
        ("F.ANY.A.max-retries = 2", "F.Any.A.max-retries"),
        (
            "ipf.flow.F.processing-time.A.B.ofset-id = x",
            "ipf.flow.F.processing-time.A.B.offset-id",
        ),
        (
            "ipf.flow.F.processing-times.A.B.timeout-duration = 1s",
            "ipf.flow.F.processing-time.A.B.timeout-duration",
        ),
        (
            "F.processing-time.A.B.timeout-duration = 1s",
            "ipf.flow.F.processing-time.A.B.timeout-duration",
        ),
    ],
)
def test_a_near_miss_key_is_an_error_that_says_what_was_meant(line: str, meant: str) -> None:
    (problem,) = problems_of(line)
    assert problem.startswith(line.split(" = ")[0].split(" {")[0])
    assert f"did you mean {meant}?" in problem


def test_with_strict_false_near_misses_become_warnings() -> None:
    config = SchedulingConfig.from_string(
        "F.S.A.timeout-duraton = 2s\nF.S.A.max-retries = 2", strict=False
    )
    (warning,) = config.warnings
    assert warning.key == "F.S.A.timeout-duraton"
    assert warning.suggestion == "F.S.A.timeout-duration"
    assert config.action("F", "S", "A").timeout is None  # the misspelt key does nothing
    assert config.action("F", "S", "A").retry.max_retries == 2


def test_with_strict_false_bad_values_still_fail_and_near_misses_are_listed_too() -> None:
    problems = problems_of("F.S.A.max-retries = -1\nF.S.A.max-retry = 1", strict=False)
    assert len(problems) == 2


def test_processing_time_is_not_taken_for_a_state_name() -> None:
    (problem,) = problems_of("F.processing-time.A.timeout-duration = 2s")
    assert "processing-time is not a state" in problem
    (problem,) = problems_of("ipf.flow.F.processing-time.A.timeout-duration = 2s")
    assert "ipf.flow.<flow>.processing-time.<source>.<destination>.<type>" in problem


def test_unrelated_keys_are_ignored() -> None:
    config = SchedulingConfig.from_string(
        """
        akka {
          loglevel = "DEBUG"
          actor.provider = cluster
          remote.artery.canonical.port = 2552
          http.server.request-timeout = 20s
          cluster.sharding.retry-interval = -1
        }
        logging { level = INFO, appenders = [console, file] }
        some.deeply.nested.unrelated.key.timeout-duration = -5s
        a.b.timeout-duration = -1
        top-level = 3
        ipf.journal.batch-size = 10
        ipf-scheduler.mongodb { uri = "mongodb://localhost/ipf" }
        F.S.A.max-retries = 1
        """
    )
    assert [key.key for key in config.action_keys()] == ["F.S.A.max-retries"]
    assert config.warnings == ()


def test_invalid_hocon_is_a_config_error_with_the_line() -> None:
    (problem,) = problems_of("F.S.A.max-retries = 1\nF.S.A {")
    assert "not valid HOCON at line 2" in problem


def test_an_unresolved_substitution_is_a_config_error() -> None:
    (problem,) = problems_of("F.S.A.max-retries = ${retries}")
    assert "${retries}" in problem


def test_substitutions_are_resolved_before_validation() -> None:
    config = SchedulingConfig.from_string("retries = 3\nF.S.A.max-retries = ${retries}")
    assert config.action("F", "S", "A").retry.max_retries == 3


def test_loading_from_a_file_and_from_a_pyhocon_tree(tmp_path: Path) -> None:
    from pyhocon import ConfigFactory

    path = tmp_path / "application.conf"
    path.write_text("F.S.A.timeout-duration = 3s\n", encoding="utf-8")
    assert SchedulingConfig.from_file(path).action("F", "S", "A").timeout == timedelta(seconds=3)
    tree = ConfigFactory.parse_file(str(path))
    assert SchedulingConfig.from_tree(tree).action("F", "S", "A").timeout == timedelta(seconds=3)
    with pytest.raises(OSError):
        SchedulingConfig.from_file(path.with_name("missing.conf"))
