"""pyhocon gives ``relativedelta`` durations when python-dateutil is installed: same answers.

python-dateutil comes with many packages (mkdocs among them), so a user's environment often
has it. The configuration must resolve the same with and without it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flowsched import ConfigError, parse_duration
from flowsched.durations import hocon_text

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "application.conf"

RESOLVE = """
import sys
if sys.argv[1] == "without":
    sys.modules["dateutil"] = None  # as if python-dateutil were not installed ...
    import pyhocon  # noqa: F401  (which decides when it is imported)
    # ... for pyhocon only: the example's calendars need the holidays package, which
    # cannot work without python-dateutil.
    del sys.modules["dateutil"]
from flowsched import SchedulingConfig
config = SchedulingConfig.from_file(sys.argv[2])
policy = config.action("OBCreditTransfer", "CheckingFraud", "CheckFraud")
deadline = config.processing_time("OBCreditTransfer", "ValidatingSchemeRules", "Complete")
print(policy.timeout, policy.retry.delays(), deadline.timeout, deadline.offset_id)
"""


def _resolve(mode: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", RESOLVE, mode, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_example_resolves_the_same_with_and_without_dateutil() -> None:
    pytest.importorskip("dateutil")
    with_dateutil = _resolve("with")
    assert with_dateutil == _resolve("without")
    assert with_dateutil.startswith("2:00:00 [datetime.timedelta(seconds=10), ")


def test_a_relativedelta_is_read_as_its_fixed_length() -> None:
    relativedelta = pytest.importorskip("dateutil.relativedelta").relativedelta
    assert parse_duration(relativedelta(hours=2, seconds=30)).total_seconds() == 7230
    assert parse_duration(relativedelta(weeks=1)).days == 7


def test_months_and_years_have_no_fixed_length() -> None:
    relativedelta = pytest.importorskip("dateutil.relativedelta").relativedelta
    with pytest.raises(ConfigError, match=r"retry-interval.*no fixed length"):
        parse_duration(relativedelta(months=1), key="Any.Any.Any.initial-retry-interval")


def test_messages_show_a_relativedelta_as_hocon_text() -> None:
    relativedelta = pytest.importorskip("dateutil.relativedelta").relativedelta
    assert hocon_text(relativedelta(seconds=2)) == "2s"
    assert hocon_text(relativedelta(months=1, days=2)) == "1mo 2d"
