"""Hostile inputs kept as plain regression tests: each one is refused with
a FlowschedError / ValueError naming what is wrong - never RecursionError, OverflowError,
UnicodeDecodeError or Python's digit-limit message."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import flowsched
from flowsched import (
    BackoffType,
    ConfigError,
    FlowschedError,
    InMemoryScheduler,
    ManualClock,
    RedeliveryPolicy,
    RetryPolicy,
    ScheduleItem,
    ScheduleKind,
    SchedulingConfig,
    parse_duration,
)
from flowsched.cli import build_app
from flowsched.delivery import MAX_ERROR_CHARS
from flowsched.flow import (
    ConcurrentUpdateError,
    FlowAlreadyExistsError,
    FlowConfigError,
    FlowDefinitionError,
    TimerAheadOfInstanceError,
    UnknownFlowError,
)
from flowsched.mongo.documents import MalformedDocument
from flowsched.port import SchedulerUnavailable

TIMER = ScheduleKind.TIMER


def nested_payload(depth: int) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    inner = payload
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    return payload


def test_flowsched_error_is_exported_and_every_error_class_derives_from_it() -> None:
    assert "FlowschedError" in flowsched.__all__
    family = (
        ConfigError,
        FlowConfigError,
        FlowDefinitionError,
        UnknownFlowError,
        TimerAheadOfInstanceError,
        ConcurrentUpdateError,
        FlowAlreadyExistsError,
        SchedulerUnavailable,
        MalformedDocument,
    )
    for error in family:
        assert issubclass(error, FlowschedError), error
    # Bad arguments stay what Python users catch.
    assert issubclass(ConfigError, ValueError) and issubclass(FlowDefinitionError, ValueError)
    assert issubclass(UnknownFlowError, KeyError)


@pytest.mark.parametrize("depth", [33, 50, 1000])
def test_deeply_nested_hocon_objects_are_a_config_error(depth: int) -> None:
    with pytest.raises(ConfigError, match="nest more than 32 deep"):
        SchedulingConfig.from_string("a {" * depth + "}" * depth)


def test_deeply_nested_hocon_lists_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="nest more than 32 deep"):
        SchedulingConfig.from_string("a = " + "[" * 300 + "]" * 300)


def test_nesting_within_the_limit_is_read() -> None:
    text = "x {" * 31 + "Any.Any.Any.timeout-duration = 2s" + "}" * 31
    SchedulingConfig.from_string(text)  # root keys under x: ignored, not refused


def test_a_thousand_part_dotted_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        SchedulingConfig.from_string("a." * 1000 + "b = 1")


def test_brackets_inside_strings_and_comments_do_not_count() -> None:
    text = 'note = "' + "{" * 100 + '"\n# ' + "[" * 100 + "\nAny.Any.Any.max-retries = 2\n"
    assert SchedulingConfig.from_string(text).action("F", "S", "A").retry.max_retries == 2


def test_a_non_utf8_file_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "latin1.conf"
    conf.write_bytes("# café\nAny.Any.Any.timeout-duration = 1s\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.conf.*not UTF-8 text \(byte 0xe9"):
        SchedulingConfig.from_file(conf)


def test_a_missing_required_include_is_a_config_error_naming_it(tmp_path: Path) -> None:
    """It was a bare FileNotFoundError, and ``flowsched check`` said it could not read the
    file that holds the include (which exists)."""
    conf = tmp_path / "main.conf"
    conf.write_text('include required("nope.conf")\nAny.Any.Any.timeout-duration = 1s\n')
    with pytest.raises(ConfigError, match=r"main\.conf: an included file cannot be read: .*nope"):
        SchedulingConfig.from_file(conf)
    with pytest.raises(ConfigError, match=r"included file cannot be read: nope\.conf"):
        SchedulingConfig.from_string('include required("nope.conf")')
    result = CliRunner().invoke(build_app(), ["check", str(conf)])
    assert result.exit_code == 1 and "nope.conf" in result.output, result.output
    assert "Traceback" not in result.output


def test_a_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    conf = tmp_path / "bom.conf"
    conf.write_bytes(
        "\ufeffAny.Any.Any.timeout-duration = 2s\nAny.Any.Any.max-retries = x\n".encode()
    )
    with pytest.raises(ConfigError, match="max-retries") as raised:  # line 2, as written
        SchedulingConfig.from_file(conf)
    assert "\ufeff" not in str(raised.value)
    conf.write_bytes("\ufeffAny.Any.Any.timeout-duration = 2s\n".encode())
    config = SchedulingConfig.from_file(conf)
    assert config.action("F", "S", "A").timeout == timedelta(seconds=2)


def test_flowsched_check_on_deep_nesting_prints_no_traceback(tmp_path: Path) -> None:
    conf = tmp_path / "deep.conf"
    conf.write_text("a {" * 60 + "}" * 60, encoding="utf-8")
    result = CliRunner().invoke(build_app(), ["check", str(conf)])
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    assert len(result.stderr.splitlines()) <= 2
    assert "nest more than 32 deep" in result.stderr


@pytest.mark.parametrize(
    "text", ["1" * 5000 + "s", "0." + "1" * 5000 + "s", "1" * 5000, " " * 10_000 + "1s"]
)
def test_durations_with_thousands_of_characters_are_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="too long for a duration") as caught:
        parse_duration(text, key="Any.Any.Any.timeout-duration")
    assert len(str(caught.value)) < 500


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("ipf-scheduler.flowsched.batch-size", "must be a whole number >= 1"),
        ("Any.Any.Any.max-retries", "must be a whole number >= 0"),
    ],
)
def test_a_quoted_count_of_thousands_of_digits_is_a_config_error(key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        SchedulingConfig.from_string(f'{key} = "{"9" * 5000}"')
    assert "int_max_str_digits" not in str(caught.value)


def test_a_huge_integer_duration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="too long"):
        parse_duration(10**5000)


def test_a_hocon_period_pyhocon_cannot_convert_is_a_config_error() -> None:
    # pyhocon overflows while parsing, or (with python-dateutil installed) hands back a
    # relativedelta too long for a timedelta: a ConfigError either way.
    with pytest.raises(ConfigError, match=r"cannot read|too long"):
        SchedulingConfig.from_string("Any.Any.Any.timeout-duration = 99999999999999 days")


def test_a_payload_nested_3000_deep_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nests objects/lists more than 32 deep"):
        ScheduleItem("deep", TIMER, datetime(2026, 1, 1, tzinfo=UTC), payload=nested_payload(3000))


def test_a_payload_nested_to_the_limit_is_accepted() -> None:
    ScheduleItem("ok", TIMER, datetime(2026, 1, 1, tzinfo=UTC), payload=nested_payload(32))


@pytest.mark.parametrize(
    "due",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
    ],
)
def test_a_due_outside_the_utc_range_is_a_value_error(due: datetime) -> None:
    with pytest.raises(ValueError, match="outside the range of UTC datetimes"):
        ScheduleItem("edge", TIMER, due)


def test_a_17_mb_id_is_a_value_error_not_document_too_large() -> None:
    with pytest.raises(ValueError, match="the limit is 1024 bytes"):
        ScheduleItem("x" * (17 * 1024 * 1024), TIMER, datetime(2026, 1, 1, tzinfo=UTC))


def test_a_lone_surrogate_id_or_flow_id_is_a_value_error() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="lone surrogate"):
        ScheduleItem("t-\udc80", TIMER, when)
    with pytest.raises(ValueError, match="flow_id"):
        ScheduleItem("t", TIMER, when, flow_id="f-\ud800")


def test_a_lone_surrogate_handler_name_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="handler name"):
        ScheduleItem("t", TIMER, datetime(2026, 1, 1, tzinfo=UTC), handler="send-\ud800")


def test_a_payload_key_with_nul_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="NUL"):
        ScheduleItem("t", TIMER, datetime(2026, 1, 1, tzinfo=UTC), payload={"a\x00b": 1})


def test_redelivery_delay_for_a_billion_failures_is_computed_not_looped() -> None:
    from flowsched.delivery import RedeliveryPolicy

    assert RedeliveryPolicy(factor=1).delay(10**9) == timedelta(seconds=3)
    assert RedeliveryPolicy(factor=1.0000001).delay(10**9) == timedelta(seconds=30)
    assert RedeliveryPolicy().delay(2**63) == timedelta(seconds=30)
    assert [RedeliveryPolicy().delay(n).seconds for n in range(1, 7)] == [3, 6, 12, 24, 30, 30]


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("lease", "999999999d", "at most 365d"),
        ("poll-interval", "366d", "at most 365d"),
        ("op-timeout", "2000000h", "at most 1d"),
        ("op-timeout", "12d", "at most 1d"),
        ("redelivery.maximum", "1000d", "at most 365d"),
        ("workers", "100000000000000000000", "from 1 to 10,000"),
        ("batch-size", "9223372036854775808", "from 1 to 100,000"),
    ],
)
def test_scheduler_settings_too_large_to_run_are_a_config_error(
    setting: str, value: str, message: str
) -> None:
    """Left through, each overflowed (a lease past the year 9999, a wait beyond the
    platform's timeout, a batch beyond 64 bits) or tried to start that many threads."""
    key = f"ipf-scheduler.flowsched.{setting}"
    with pytest.raises(ConfigError, match=message) as raised:
        SchedulingConfig.from_string(f"{key} = {value}").scheduler_settings()
    assert raised.value.problems[0].key == key


def test_in_memory_scheduler_arguments_too_large_to_run_are_a_value_error() -> None:
    from flowsched import InMemoryScheduler, RedeliveryPolicy

    with pytest.raises(ValueError, match="workers must be from 1 to 10000"):
        InMemoryScheduler(workers=10**20)
    with pytest.raises(ValueError, match="max_wait must be positive and at most 365 days"):
        InMemoryScheduler(max_wait=timedelta(days=999_999_999))
    with pytest.raises(ValueError, match="redelivery maximum must be at most 365 days"):
        RedeliveryPolicy(maximum=timedelta(days=999_999_999))


def test_the_largest_allowed_scheduler_settings_are_accepted() -> None:
    text = """ipf-scheduler.flowsched {
      lease = 365d, poll-interval = 365d, op-timeout = 1d, workers = 10000,
      batch-size = 100000, redelivery { initial = 365d, maximum = 365d }
    }"""
    settings = SchedulingConfig.from_string(text).scheduler_settings()
    assert (settings.lease, settings.workers, settings.batch_size) == (
        timedelta(days=365),
        10_000,
        100_000,
    )


def test_a_nan_redelivery_factor_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="factor must be a number >= 1"):
        RedeliveryPolicy(factor=float("nan"))


@pytest.mark.parametrize("adapter", ["memory", "mongomock"])
def test_a_failure_text_no_store_can_keep_is_kept_escaped_and_counted(adapter: str) -> None:
    # An OSError on an undecodable file name carries a lone surrogate; MongoDB cannot store
    # it. Unescaped, the outcome could not be written: the item came back every lease,
    # its failures never counted, never dead-lettered.
    clock = ManualClock(datetime(2026, 1, 5, tzinfo=UTC))
    policy = RedeliveryPolicy(max_attempts=2)
    if adapter == "memory":
        scheduler: Any = InMemoryScheduler(clock=clock, redelivery=policy)
    else:
        mongomock = pytest.importorskip("mongomock")
        from flowsched.mongo import MongoScheduler

        collection = mongomock.MongoClient(tz_aware=True)["fs"]["timers"]
        scheduler = MongoScheduler(collection, clock=clock, redelivery=policy)

    def broken(item: ScheduleItem, attempt: int) -> None:
        raise OSError("cannot open b'\\xff.csv': " + "\udcff" + "x" * 5000)

    scheduler.subscribe(ScheduleKind.TIMER, broken)
    scheduler.schedule(ScheduleItem("t", ScheduleKind.TIMER, clock.now()))
    scheduler.start()
    clock.advance(timedelta(minutes=5))
    [dead] = scheduler.dead_letters()
    assert dead.attempts == 2
    assert dead.error.startswith("OSError: cannot open b'\\xff.csv': \\udcffxxx")
    assert len(dead.error) == MAX_ERROR_CHARS and dead.error.endswith("\u2026")
    scheduler.close()


@pytest.mark.parametrize("adapter", ["memory", "mongomock"])
@pytest.mark.parametrize("bad", [None, {"id": "t", "kind": "TIMER"}, "t"])
def test_scheduling_something_that_is_no_item_is_a_type_error_naming_it(
    adapter: str, bad: object
) -> None:
    if adapter == "memory":
        scheduler: Any = InMemoryScheduler()
    else:
        mongomock = pytest.importorskip("mongomock")
        from flowsched.mongo import MongoScheduler

        scheduler = MongoScheduler(mongomock.MongoClient(tz_aware=True)["fs"]["timers"])
    with pytest.raises(TypeError, match="schedule\\(\\) takes a ScheduleItem, got"):
        scheduler.schedule(bad)


def test_a_due_that_is_no_datetime_is_a_type_error_naming_it() -> None:
    with InMemoryScheduler() as scheduler, pytest.raises(TypeError, match="must be a datetime"):
        scheduler.requeue("t", "2026-01-01")  # type: ignore[arg-type]


def test_a_retry_count_too_large_to_list_is_a_config_error() -> None:
    # 10**25 retries: the retry schedule (delays(), flowsched backoff) would never finish.
    with pytest.raises(
        ConfigError,
        match="max-retries = 10000000000000000000000000: must be a whole number >= 0 and at most",
    ):
        SchedulingConfig.from_string("ipf.flow.F.S.A.max-retries = 10000000000000000000000000")
    config = SchedulingConfig.from_string("ipf.flow.F.S.A.max-retries = 10000")
    assert config.action("F", "S", "A").retry.max_retries == 10_000


# -- delays past the year 9999: a ValueError naming the call, never an OverflowError -------

END_OF_TIME = datetime(9999, 12, 31, 23, 59, 58, tzinfo=UTC)


@pytest.mark.parametrize("delay", [timedelta.max, timedelta(days=3_000_000)])
def test_a_single_timer_past_the_year_9999_is_a_value_error(delay: timedelta) -> None:
    scheduler = InMemoryScheduler(clock=ManualClock(datetime(2026, 1, 1, tzinfo=UTC)))
    with pytest.raises(ValueError, match=r"create_single_timer\('t'\) delay.*past the year 9999"):
        scheduler.create_single_timer("t", delay, "h")
    assert not scheduler.exists("t")


def test_moving_a_manual_clock_past_the_year_9999_is_a_value_error() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match=r"ManualClock.advance: .* past the year 9999"):
        clock.advance(timedelta.max)
    with pytest.raises(ValueError, match=r"ManualClock.jump: .* past the year 9999"):
        clock.jump(timedelta(days=3_000_000))
    assert clock.now() == datetime(2026, 1, 1, tzinfo=UTC)  # not moved


def test_a_failure_whose_next_attempt_is_past_the_year_9999_dead_letters_it() -> None:
    clock = ManualClock(END_OF_TIME)
    scheduler = InMemoryScheduler(clock=clock, redelivery=RedeliveryPolicy())
    ran: list[str] = []

    def fails(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("down")

    scheduler.register("h", fails)
    scheduler.subscribe(TIMER, lambda item, attempt: ran.append(item.id))
    scheduler.schedule(ScheduleItem("last", TIMER, END_OF_TIME, handler="h"))
    scheduler.schedule(ScheduleItem("other", TIMER, END_OF_TIME))
    clock.advance(timedelta(0))  # raised OverflowError and stopped delivering
    [dead] = scheduler.dead_letters()
    assert dead.item.id == "last" and "past year 9999" in dead.error
    assert ran == ["other"]  # the other item was delivered all the same


def _end_of_time_scheduler(adapter: str, clock: ManualClock) -> Any:
    if adapter == "memory":
        return InMemoryScheduler(clock=clock, redelivery=RedeliveryPolicy())
    mongomock = pytest.importorskip("mongomock")
    from flowsched import AsyncMongoScheduler, MongoScheduler

    collection = mongomock.MongoClient(tz_aware=True)["fs"]["timers"]
    kind = AsyncMongoScheduler if adapter == "async mongomock" else MongoScheduler
    return kind(collection, node_id="n", clock=clock, redelivery=RedeliveryPolicy())


@pytest.mark.parametrize("adapter", ["memory", "mongomock", "async mongomock"])
def test_every_adapter_runs_to_the_last_second_of_the_year_9999(adapter: str) -> None:
    """A lease, a heartbeat or an audit turn that would end past the last date ends at it:
    the Mongo adapters raised OverflowError from every claim at the end of time."""
    clock = ManualClock(END_OF_TIME)
    scheduler = _end_of_time_scheduler(adapter, clock)
    ran: list[str] = []

    def fails(item: ScheduleItem, attempt: int) -> None:
        raise RuntimeError("down")

    async def run() -> None:
        scheduler.register("h", fails)
        scheduler.subscribe(TIMER, lambda item, attempt: ran.append(item.id))
        await scheduler.schedule(ScheduleItem("last", TIMER, END_OF_TIME, handler="h"))
        await scheduler.schedule(ScheduleItem("other", TIMER, END_OF_TIME))
        assert await scheduler.run_due() == 2
        [dead] = await scheduler.dead_letters()
        assert dead.item.id == "last" and "past year 9999" in dead.error
        assert not await scheduler.exists("last")

    if adapter == "async mongomock":
        asyncio.run(run())
    else:
        scheduler.register("h", fails)
        scheduler.subscribe(TIMER, lambda item, attempt: ran.append(item.id))
        scheduler.schedule(ScheduleItem("last", TIMER, END_OF_TIME, handler="h"))
        scheduler.schedule(ScheduleItem("other", TIMER, END_OF_TIME))
        assert scheduler.run_due() == 2
        [dead] = scheduler.dead_letters()
        assert dead.item.id == "last" and "past year 9999" in dead.error
        assert not scheduler.exists("last")
    assert ran == ["other"]


@pytest.mark.parametrize("jitter", ["--jitter", "--no-jitter"])
def test_backoff_with_the_most_retries_says_which_never_come(jitter: str) -> None:
    # 10000 is the documented maximum; the waits added up overflowed (a traceback, exit 1).
    result = CliRunner().invoke(build_app(), ["backoff", "--max-retries", "10000", jitter])
    assert result.exit_code == 0, result.output
    assert "to 10000 are never scheduled" in result.stdout
    assert "Traceback" not in result.output


def test_user_defined_without_custom_backoffs_names_the_field_with_jitter_on() -> None:
    with pytest.raises(ValueError, match="USER_DEFINED needs custom_backoffs"):
        RetryPolicy(max_retries=2, backoff_type=BackoffType.USER_DEFINED)  # jitter: default on
    result = CliRunner().invoke(build_app(), ["backoff", "--type", "USER_DEFINED"])
    assert result.exit_code == 2
    assert "USER_DEFINED needs custom_backoffs" in result.stderr
    assert "Assertion" not in result.output
