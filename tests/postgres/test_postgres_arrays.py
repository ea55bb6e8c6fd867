"""The firing path's array parameters (flowsched.postgres.arrays): the bytes psycopg would
send for the same list, and the same values back from the server, in any client encoding;
a number beyond 64 bits is refused before anything is sent."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from psycopg.adapt import PyFormat, Transformer

from flowsched.postgres.arrays import Int8Array, TextArray

TEXTS = [
    ["t-1", "t-2", "t-10"],
    ["node-a"] * 5,  # one value repeated (the owners of a batch)
    ["é", "", "a,b", '"q"', "{x}", "NULL", "ü" * 300],
    [None, "x", None],
    [None],
    [],
]
NUMBERS = [[1, 2, 3], [0, -1, 2**63 - 1, -(2**63)], [7] * 4, [None, 5], []]


@pytest.mark.parametrize("values", TEXTS[:4], ids=range(4))
def test_a_text_array_is_the_bytes_psycopg_sends_for_the_list(values: list[str | None]) -> None:
    ours = Transformer().get_dumper(TextArray(values), PyFormat.BINARY)
    theirs = Transformer().get_dumper(values, PyFormat.BINARY)
    theirs = theirs.upgrade(values, PyFormat.BINARY)
    assert ours.oid == theirs.oid == 1009
    assert bytes(ours.dump(TextArray(values)) or b"") == bytes(theirs.dump(values) or b"")


@pytest.mark.parametrize("encoding", ["UTF8", "LATIN1", "SQL_ASCII"])
def test_the_server_reads_back_each_array_as_the_list(postgres_url: str, encoding: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"SET client_encoding TO '{encoding}'")
        for values in TEXTS:
            row = conn.execute("SELECT %(a)b::text[]", {"a": TextArray(values)}).fetchone()
            plain = conn.execute("SELECT %(a)s::text[]", {"a": values}).fetchone()
            assert row == plain  # SQL_ASCII: both the UTF-8 bytes (psycopg reads no text)
            assert encoding == "SQL_ASCII" or row == (values,)
        for numbers in NUMBERS:
            got = conn.execute(
                "SELECT %(a)b::bigint[], %(b)b::int[]",
                {
                    "a": Int8Array(numbers),
                    "b": Int8Array([n for n in numbers if n is None or -5 < n < 5]),
                },
            ).fetchone()
            assert got == (numbers, [n for n in numbers if n is None or -5 < n < 5])


def test_a_number_beyond_64_bits_is_refused_before_sending(
    postgres_url: str, fresh_table: Callable[[], str]
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for bad in ([2**63], [1, -(2**63) - 1], [None, 2**64]):
            with pytest.raises(psycopg.DataError, match="64-bit"):
                conn.execute("SELECT %(a)b::bigint[]", {"a": Int8Array(bad)})
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on
