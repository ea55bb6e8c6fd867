"""Connecting: the URI's password is never printed; problems are one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from timers_kit import run
from typer.testing import CliRunner

from flowsched.cli import build_app
from flowsched.cli.mongo_target import MongoTarget, redact

# Nothing listens on port 1: the connection is refused at once, no server needed.
UNREACHABLE = "mongodb://alice:s3cret@127.0.0.1:1/?directConnection=true"


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("mongodb://localhost:27017", "mongodb://localhost:27017"),
        ("mongodb://app:s3cret@db1:27017/shop", "mongodb://app:***@db1:27017/shop"),
        (
            "mongodb+srv://app:p%40ss@cluster0.example.net/?retryWrites=true",
            "mongodb+srv://app:***@cluster0.example.net/?retryWrites=true",
        ),
        ("mongodb://app:s3cret@db1,db2,db3/?replicaSet=rs0", "mongodb://app:***@db1,db2,db3/?replicaSet=rs0"),
        ("mongodb://app@db1/", "mongodb://app@db1/"),  # no password: nothing to hide
        ("mongodb://app:@db1/", "mongodb://app:***@db1/"),
        # Unescaped "@" and "/" in the password (invalid, but typed): masked all the same.
        ("mongodb://app:s3c@ret@db1/", "mongodb://app:***@db1/"),
        ("mongodb://app:s3/cr@t@db1/x", "mongodb://app:***@db1/x"),
        ("app:s3cret@db1", "app:***@db1"),
    ],
)  # fmt: skip
def test_redact_masks_the_password_only(uri, shown):
    assert redact(uri) == shown


def test_scrub_removes_the_password_from_messages_escaped_or_not():
    target = MongoTarget("mongodb://app:p%40ss%2Fw@db1/", "flowsched", "timers", timedelta(1))

    assert target.scrub("auth p%40ss%2Fw failed\n for p@ss/w") == "auth *** failed for ***"


def test_an_unreachable_server_is_one_line_without_the_password():
    code, out, err = run(build_app(), ["timers", "list", "--uri", UNREACHABLE, "--timeout", "2s"])

    assert (code, out) == (2, "")
    assert err.startswith(
        "flowsched: error: cannot reach MongoDB at "
        "mongodb://alice:***@127.0.0.1:1/?directConnection=true: 127.0.0.1:1: "
    )
    assert "refused" in err.lower()
    assert err.count("\n") == 1
    assert "s3cret" not in err


def test_the_uri_comes_from_the_environment_and_is_not_shown_in_help():
    runner = CliRunner(env={"FLOWSCHED_MONGO_URI": "mongodb://bob:hunter2@127.0.0.1:1/"})

    failed = runner.invoke(build_app(), ["timers", "stats", "--timeout", "1s"])
    helped = runner.invoke(build_app(), ["timers", "stats", "--help"])

    assert failed.exit_code == 2
    assert "cannot reach MongoDB at mongodb://bob:***@127.0.0.1:1/" in failed.stderr
    assert helped.exit_code == 0
    assert "hunter2" not in failed.stderr + failed.stdout + helped.stdout


def test_an_invalid_uri_is_one_line_without_the_password():
    code, _, err = run(build_app(), ["timers", "show", "x", "--uri", "mongodb://al:s3c@ret@h/"])

    assert code == 2
    assert err.startswith("flowsched: error: invalid MongoDB URI mongodb://al:***@h/: ")
    assert "s3c" not in err and "ret@" not in err


def test_a_collection_that_does_not_exist_is_named(namespace, timers):
    namespace.timer("t-1", timedelta(minutes=1))

    code, _, err = timers("list", "--collection", "timer")

    assert code == 2
    assert err == (
        "flowsched: error: no collection flowsched.timer at mongodb://localhost:27017 "
        "(check --uri, --db and --collection)\n"
    )


WITHOUT_PYMONGO = """
import sys
sys.modules["pymongo"] = None  # as if the driver were not installed
sys.modules["bson"] = None
sys.argv = ["flowsched", *sys.argv[1:]]
from flowsched.cli import main
main()
"""


def test_without_the_driver_timers_names_the_extra_and_other_verbs_still_work():
    def flowsched(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", WITHOUT_PYMONGO, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    timers = flowsched("timers", "stats")
    backoff = flowsched("backoff", "--max-retries", "2")

    assert timers.returncode == 2
    assert timers.stderr == (
        "flowsched: error: flowsched timers needs the MongoDB driver: "
        "pip install 'flowsched[mongo]'\n"
    )
    assert backoff.returncode == 0, backoff.stderr
