"""``flowsched timers`` reads the scheduler block of ``application.conf``; options override it.

One set of connection options (``--config``, ``--uri``, ``--db``/``--database``,
``--collection``, ``--timeout``) serves every verb, given before the verb or after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from timers_kit import run
from typer.testing import CliRunner

from flowsched.cli import build_app
from flowsched.cli.mongo_target import MongoTarget
from flowsched.cli.timers_commands import TimersCli

CONF = """
akka.loglevel = INFO
ipf-scheduler {
  mongodb {
    uri = "mongodb://app:s3cret@db.example:27017/?directConnection=true"
    database-name = "scheduled"
    collection = "ipf_timers"
  }
}
"""


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "application.conf"
    path.write_text(CONF)
    return path


class Recorder:
    """Runs ``flowsched timers`` and records where each verb would have connected."""

    def __init__(self, mock_client: Any) -> None:
        self.targets: list[MongoTarget] = []
        self.client = mock_client
        self.client["scheduled"]["ipf_timers"].insert_one({"_id": "seed"})

    @contextmanager
    def connect(self, target: MongoTarget) -> Iterator[Any]:
        self.targets.append(target)
        yield self.client[target.db]

    def target(self, *args: str, env: dict[str, str | None] | None = None) -> MongoTarget:
        isolated: dict[str, str | None] = {"FLOWSCHED_MONGO_URI": None, "FLOWSCHED_CONFIG": None}
        runner = CliRunner(env={**isolated, **(env or {})})
        runner.invoke(TimersCli(connect=self.connect).app(), list(args))
        assert self.targets, "the verb never connected"
        return self.targets[-1]


@pytest.fixture
def recorder(mock_client: Any) -> Recorder:
    return Recorder(mock_client)


def test_the_config_gives_uri_database_and_collection(recorder, conf):
    target = recorder.target("--config", str(conf), "stats")

    assert target.uri == "mongodb://app:s3cret@db.example:27017/?directConnection=true"
    assert (target.db, target.collection) == ("scheduled", "ipf_timers")


def test_flowsched_config_names_the_file(recorder, conf):
    target = recorder.target("stats", env={"FLOWSCHED_CONFIG": str(conf)})

    assert (target.db, target.collection) == ("scheduled", "ipf_timers")


@pytest.mark.parametrize("where", ["before the verb", "after the verb"])
def test_options_override_the_config(recorder, conf, where):
    options = ["--uri", "mongodb://other:27017", "--database", "elsewhere", "--timeout", "2s"]
    if where == "before the verb":
        args = ["--config", str(conf), *options, "list"]
    else:
        args = ["--config", str(conf), "list", *options]

    target = recorder.target(*args)

    assert (target.uri, target.db) == ("mongodb://other:27017", "elsewhere")
    assert target.collection == "ipf_timers"  # not given: still the config's
    assert target.timeout == timedelta(seconds=2)


def test_an_option_after_the_verb_wins_over_one_before_it(recorder):
    target = recorder.target("--db", "first", "list", "--db", "second")

    assert target.db == "second"


def test_the_database_named_in_the_uri_is_used_when_no_db_is_given(recorder):
    target = recorder.target("stats", env={"FLOWSCHED_MONGO_URI": "mongodb://db.example/ipf"})

    assert (target.db, target.collection) == ("ipf", "timers")


def test_without_anything_the_defaults_are_localhost_flowsched_timers(recorder):
    target = recorder.target("stats")

    assert (target.uri, target.db, target.collection) == (
        "mongodb://localhost:27017",
        "flowsched",
        "timers",
    )
    assert target.timeout == timedelta(seconds=5)


def test_a_bad_scheduler_setting_in_the_config_is_one_line_without_the_password(tmp_path):
    path = tmp_path / "application.conf"
    path.write_text('ipf-scheduler.mongodb { uri = "http://app:s3cret@h/", colection = x }\n')

    code, out, err = run(build_app(), ["timers", "--config", str(path), "stats"])

    assert (code, out) == (2, "")
    assert err.startswith(f"flowsched: error: --config {path}: ipf-scheduler.mongodb.uri: must be")
    assert "(and 1 more); see flowsched check" in err
    assert "s3cret" not in err
    assert err.count("\n") == 1


def test_a_missing_config_file_is_one_line(tmp_path):
    code, _, err = run(build_app(), ["timers", "--config", str(tmp_path / "nope.conf"), "list"])

    assert code == 2
    assert err.startswith(f"flowsched: error: --config {tmp_path / 'nope.conf'}: cannot read it")


def test_flow_keys_of_the_same_file_do_not_matter_to_the_timers_verbs(recorder, tmp_path):
    path = tmp_path / "application.conf"
    path.write_text(CONF + "ipf.flow.Payment.Any.Any.timeout-duraton = 2s\n")

    assert recorder.target("--config", str(path), "stats").db == "scheduled"
