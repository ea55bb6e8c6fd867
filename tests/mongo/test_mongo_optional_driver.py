"""``import flowsched`` works without pymongo; building a Mongo class then names the extra."""

from __future__ import annotations

import subprocess
import sys

WITHOUT_PYMONGO = """
import sys
sys.modules["pymongo"] = None  # as if the driver were not installed
sys.modules["bson"] = None
import flowsched
from flowsched import AsyncMongoFlowStore, MongoFlowStore, MongoScheduler
try:
    AsyncMongoFlowStore(object())
except ImportError as exc:
    print(exc)
try:
    MongoFlowStore(object())
except ImportError as exc:
    print(exc)
try:
    MongoScheduler(object())
except ImportError as exc:
    print(exc)
"""


def test_flowsched_imports_without_the_driver_and_says_which_extra_is_missing():
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_PYMONGO], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(" ")[0] for line in lines] == [
        "AsyncMongoFlowStore",
        "MongoFlowStore",
        "MongoScheduler",
    ]
    assert all("pip install 'flowsched[mongo]'" in line for line in lines)
