"""The PostgreSQL tests run on the server at ``FLOWSCHED_POSTGRES_URL`` (``make test`` starts
one); the fixtures ``postgres_url`` and ``fresh_table`` are in ``tests/conftest.py``."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")
