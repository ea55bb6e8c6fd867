"""The simulator's tests need mongomock (a dev/testing extra)."""

import pytest

pytest.importorskip("mongomock")
