"""A configuration mistake is never silent: every key that does not fit is rejected, naming
the key and the closest valid form; every key that fits (or is another library's) loads."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from flowsched import ConfigError, SchedulingConfig

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "application.conf"
FORM = "<Flow>.<State>.<Action>.<type>"
PT_FORM = "ipf.flow.<flow>.processing-time.<source>.<destination>.<type>"

# (configuration, the key the message must name, the fix it must suggest)
WRONG = [
    # unknown type names: the words people write instead
    ("Any.S.A.jitter = false", "Any.S.A.jitter", "did you mean Any.S.A.jitter-enabled?"),
    ("Any.S.A.retries = 5", "Any.S.A.retries", "did you mean Any.S.A.max-retries?"),
    ("Any.S.A.timeout = 30s", "Any.S.A.timeout", "did you mean Any.S.A.timeout-duration?"),
    ("Any.S.A.backoff = LINEAR", "Any.S.A.backoff", "did you mean Any.S.A.backoff-type?"),
    ("ipf.flow.F.S.A.backoffs = [1s]", "ipf.flow.F.S.A.backoffs", "ipf.flow.F.S.A.custom-backoffs"),
    ("Any.S.A.maxRetries = 2", "Any.S.A.maxRetries", "did you mean Any.S.A.max-retries?"),
    ("Any.S.A.Timeout-Duration = 1s", "Any.S.A.Timeout-Duration", "Any.S.A.timeout-duration?"),
    ("Any.S.A.timeout-duraton = 1s", "Any.S.A.timeout-duraton", "Any.S.A.timeout-duration?"),
    ("F.S.A.max-retry = 1", "F.S.A.max-retry", "did you mean F.S.A.max-retries?"),
    ("ipf.flow.F.S.A.colour = red", "ipf.flow.F.S.A.colour", "valid types are timeout-duration"),
    (
        "ipf.flow.F.S.A.offset-id = X",
        "ipf.flow.F.S.A.offset-id",
        f"offset-id is a processing-time type (keys {PT_FORM})",
    ),
    # a level missing or extra
    (
        "ipf.flow.OBCreditTransfer.CheckingFraud.timeout-duration = 2s",
        "ipf.flow.OBCreditTransfer.CheckingFraud.timeout-duration",
        "did you mean ipf.flow.OBCreditTransfer.CheckingFraud.Any.timeout-duration?",
    ),
    (
        "ipf.flow.F.CheckFraud.max-retries = 1",
        "ipf.flow.F.CheckFraud.max-retries",
        "did you mean ipf.flow.F.Any.CheckFraud.max-retries?",
    ),
    ("ipf.flow.F.max-retries = 1", "ipf.flow.F.max-retries", "ipf.flow.F.Any.Any.max-retries?"),
    ("ipf.flow.max-retries = 1", "ipf.flow.max-retries", "ipf.flow.Any.Any.Any.max-retries?"),
    ("Any.S.max-retries = 1", "Any.S.max-retries", f"1 level missing: action keys are {FORM}"),
    (
        "ipf.flow.F.S.A.Extra.max-retries = 1",
        "ipf.flow.F.S.A.Extra.max-retries",
        "1 level too many: action keys are ipf.flow.<Flow>.<State>.<Action>.<type>; "
        "did you mean ipf.flow.F.S.A.max-retries?",
    ),
    ("Any.S.A.B.C.timeout-duration = 1s", "Any.S.A.B.C.timeout-duration", "2 levels too many"),
    # ipf.flows, and the wildcard's spelling
    (
        "ipf.flows.F.S.A.max-retries = 1",
        "ipf.flows.F.S.A.max-retries",
        "ipf.flow.F.S.A.max-retries?",
    ),
    ("ipf.Flow.F.S.A.max-retries = 1", "ipf.Flow.F.S.A.max-retries", "ipf.flow.F.S.A.max-retries?"),
    (
        "any.any.ScoreCredit.max-retries = 1",
        "any.any.ScoreCredit.max-retries",
        "the wildcard is spelt Any; did you mean Any.Any.ScoreCredit.max-retries?",
    ),
    ("ANY.S.A.max-retries = 1", "ANY.S.A.max-retries", "did you mean Any.S.A.max-retries?"),
    (
        "ipf.flow.F.any.A.timeout-duration = 1s",
        "ipf.flow.F.any.A.timeout-duration",
        "did you mean ipf.flow.F.Any.A.timeout-duration?",
    ),
    ("ipf.flow = 3", "ipf.flow", "ipf.flow must be an object of keys"),
    # processing-time in the wrong place or with the wrong parts
    (
        "ipf.flow.F.S.processing-time.D.timeout-duration = 1s",
        "ipf.flow.F.S.processing-time.D.timeout-duration",
        "processing-time comes right after the flow name; "
        "did you mean ipf.flow.F.processing-time.S.D.timeout-duration?",
    ),
    (
        "ipf.flow.F.S.processing-time.timeout-duration = 1s",
        "ipf.flow.F.S.processing-time.timeout-duration",
        PT_FORM,
    ),
    (
        "ipf.flow.F.processing-times.S.D.timeout-duration = 1s",
        "ipf.flow.F.processing-times.S.D.timeout-duration",
        "did you mean ipf.flow.F.processing-time.S.D.timeout-duration?",
    ),
    (
        "ipf.flow.F.processing-time.S.D.timeout = 1s",
        "ipf.flow.F.processing-time.S.D.timeout",
        "did you mean ipf.flow.F.processing-time.S.D.timeout-duration?",
    ),
    (
        "ipf.flow.F.processing-time.S.timeout-duration = 1s",
        "ipf.flow.F.processing-time.S.timeout-duration",
        "1 name after processing-time, expected 2 (source, destination)",
    ),
    (
        "F.processing-time.S.D.timeout-duration = 1s",
        "F.processing-time.S.D.timeout-duration",
        "processing-time keys live under ipf.flow; "
        "did you mean ipf.flow.F.processing-time.S.D.timeout-duration?",
    ),
    # the schedulers' settings
    (
        'ipf-scheduler.mongodb.url = "mongodb://h/db"',
        "ipf-scheduler.mongodb.url",
        "did you mean ipf-scheduler.mongodb.uri?",
    ),
    (
        "ipf-scheduler.mongodb.database = x",
        "ipf-scheduler.mongodb.database",
        "did you mean ipf-scheduler.mongodb.database-name?",
    ),
    (
        "ipf-scheduler.flowsched.poll-intervall = 1s",
        "ipf-scheduler.flowsched.poll-intervall",
        "did you mean ipf-scheduler.flowsched.poll-interval?",
    ),
    ("ipf-scheduler.flowsched.lease = -5s", 'ipf-scheduler.flowsched.lease = "-5s"', "negative"),
    ("ipf-scheduler.flowsched.poll-interval = 0s", "flowsched.poll-interval = 0s", "above zero"),
    ("ipf-scheduler.flowsched.batch-size = 0", "flowsched.batch-size = 0", "whole number >= 1"),
    ("ipf-scheduler.flowsched.workers = 2.5", "flowsched.workers = 2.5", "whole number >= 1"),
    (
        "ipf-scheduler.flowsched.max-attempts = two",
        'ipf-scheduler.flowsched.max-attempts = "two"',
        "whole number >= 1",
    ),
    (
        "ipf-scheduler.flowsched.redelivery { initial = 10s, maximum = 5s }",
        "ipf-scheduler.flowsched.redelivery.maximum = 5s",
        "must be at least redelivery initial (10s)",
    ),
    (
        "ipf-scheduler.flowsched.redelivery.factor = 0.5",
        "ipf-scheduler.flowsched.redelivery.factor = 0.5",
        "must be a number >= 1",
    ),
    (
        "ipf-scheduler.flowsched.redelivery.intial = 1s",
        "ipf-scheduler.flowsched.redelivery.intial",
        "did you mean ipf-scheduler.flowsched.redelivery.initial?",
    ),
    (
        'ipf-scheduler.mongodb.uri = "localhost:27017"',
        'ipf-scheduler.mongodb.uri = "localhost:27017"',
        'must be a MongoDB connection string ("mongodb://host/db")',
    ),
    (
        'ipf-scheduler.mongodb.database-name = "my.db"',
        "ipf-scheduler.mongodb.database-name",
        "must be a MongoDB database name",
    ),
    (
        'ipf-sheduler.mongodb.uri = "mongodb://h/db"',
        "ipf-sheduler",
        "did you mean ipf-scheduler?",
    ),
    ("ipf-scheduler.quartz.threads = 4", "ipf-scheduler.quartz", "unknown scheduler setting"),
    ("ipf-scheduler = 3", "ipf-scheduler = 3", "must be an object"),
]


@pytest.mark.parametrize(("conf", "key", "fix"), WRONG, ids=[w[0][:50] for w in WRONG])
def test_a_wrong_key_is_rejected_naming_the_key_and_the_fix(conf: str, key: str, fix: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SchedulingConfig.from_string(conf)

    matching = [str(p) for p in caught.value.problems if key in str(p)]
    assert matching, f"no problem names {key!r}: {caught.value}"
    assert any(fix in text for text in matching), f"no fix {fix!r} in {matching}"


def test_the_table_has_enough_wrong_configs() -> None:
    assert len(WRONG) >= 30


def _levels_from(winner: int) -> str:
    """Keys at precedence levels ``winner``..8 for F.S.A, each setting max-retries = level."""
    triples = [
        "F.S.A",
        "Any.S.A",
        "F.Any.A",
        "Any.Any.A",
        "F.S.Any",
        "Any.S.Any",
        "F.Any.Any",
        "Any.Any.Any",
    ]
    return "\n".join(
        f"{triple}.max-retries = {level}"
        for level, triple in enumerate(triples, start=1)
        if level >= winner
    )


RIGHT = [(f"level {n} wins", _levels_from(n), n) for n in range(1, 9)] + [
    (
        "ipf.flow form wins over the same root key",
        "F.S.A.max-retries = 1\nipf.flow.F.S.A.max-retries = 9",
        9,
    ),
    (
        "foreign blocks with flow-like leaves are ignored",
        """
        akka { http.client.timeout-duration = -5s, cluster.retries = many }
        alpakka.s3.retry-settings { max-retries = -3, timeout = soon }
        logging { level = INFO }
        kamon.environment.service = x
        Any.Any.Any.max-retries = 3
        """,
        3,
    ),
    ("other ipf settings are IPF's", "ipf.journal.batch-size = 10\nF.S.A.max-retries = 4", 4),
    ("lower-case library blocks are ignored", "mylib.client.retries = 5\nmylib.x.timeout = 1s", 0),
    (
        "upper-case blocks that are not flow-shaped are ignored",
        "Kamon.Reporter.enabled = true\nService.Name = x\nAny.S.Any.max-retries = 2",
        2,
    ),
    (
        "nested objects",
        "Any { S { A { max-retries = 5, jitter-enabled = false } } }",
        5,
    ),
    (
        "the scheduler settings, all of them",
        """
        ipf-scheduler {
          mongodb { uri = "mongodb://localhost/ipf", database-name = scheduled, collection = t }
          flowsched {
            poll-interval = 500ms, lease = 1m, batch-size = 10, workers = 2, op-timeout = 5s
            redelivery { initial = 1s, maximum = 1m, factor = 3 }
            max-attempts = 4, node-id = node-a
          }
        }
        F.S.A.max-retries = 1
        """,
        1,
    ),
    (
        "a processing-time limit with an offset",
        """
        ipf.flow.F.processing-time.S.D { timeout-duration = 2s, offset-id = AcceptedAt }
        ipf.flow.F.S.A.max-retries = 6
        """,
        6,
    ),
    ("max-attempts may be null", "ipf-scheduler.flowsched.max-attempts = null", 0),
]


@pytest.mark.parametrize(("conf", "retries"), [r[1:] for r in RIGHT], ids=[r[0] for r in RIGHT])
def test_a_right_config_is_accepted(conf: str, retries: int) -> None:
    config = SchedulingConfig.from_string(conf)

    assert config.action("F", "S", "A").retry.max_retries == retries
    assert config.warnings == ()
    assert not [p for p in config.root_problems() if p.named_like_a_flow]


def test_the_table_has_enough_right_configs() -> None:
    assert len(RIGHT) >= 15


def test_the_example_file_is_right() -> None:
    config = SchedulingConfig.from_file(EXAMPLE)

    assert config.root_problems() == ()
    assert config.scheduler_settings().database() == "scheduled"


def test_every_wrong_key_of_a_file_is_listed_at_once_with_its_line(tmp_path: Path) -> None:
    conf = tmp_path / "application.conf"
    conf.write_text(
        "Any.CheckingFraud.CheckFraud {\n"
        "  jitter = false\n"
        "  retries = 5\n"
        "}\n"
        "ipf.flows.F.S.A.max-retries = 1\n",
        encoding="utf-8",
    )

    with pytest.raises(ConfigError) as caught:
        SchedulingConfig.from_file(conf)

    shown = [str(p) for p in caught.value.problems]
    assert shown[0].startswith(f"{conf}:2: Any.CheckingFraud.CheckFraud.jitter = false:")
    assert shown[1].startswith(f"{conf}:3: Any.CheckingFraud.CheckFraud.retries = 5:")
    assert shown[2].startswith(f"{conf}:5: ipf.flows.F.S.A.max-retries = 1:")
    assert [p.line for p in caught.value.problems] == [2, 3, 5]


def test_a_root_block_that_looks_like_a_flow_is_a_problem_kept_for_check_and_build() -> None:
    config = SchedulingConfig.from_string(
        "OBCreditTransfer.CheckingFraud.timeout-duration = 2s\nOBCreditTransfer.S.A.retries = 2"
    )

    found = {p.problem.key: p for p in config.root_problems()}
    assert set(found) == {
        "OBCreditTransfer.CheckingFraud.timeout-duration",
        "OBCreditTransfer.S.A.retries",
    }
    assert found["OBCreditTransfer.S.A.retries"].flow == "OBCreditTransfer"
    assert found["OBCreditTransfer.S.A.retries"].problem.suggestion == (
        "OBCreditTransfer.S.A.max-retries"
    )
    # Nothing configured: the keys do not apply to anything.
    assert config.action("OBCreditTransfer", "CheckingFraud", "X").timeout is None


def test_wrong_keys_are_only_warnings_when_not_strict() -> None:
    config = SchedulingConfig.from_string("Any.S.A.retries = 5", strict=False)

    (warning,) = config.warnings
    assert warning.suggestion == "Any.S.A.max-retries"


def test_a_right_timeout_under_nested_ipf_flow_blocks_loads() -> None:
    config = SchedulingConfig.from_string(
        "ipf { flow { F { S { A { timeout-duration = 3s } } } } }"
    )

    assert config.action("F", "S", "A").timeout == timedelta(seconds=3)


def test_a_state_named_processing_time_in_pascal_case_is_a_state() -> None:
    config = SchedulingConfig.from_string("ipf.flow.F.ProcessingTime.A.max-retries = 2")

    assert config.action("F", "ProcessingTime", "A").retry.max_retries == 2
