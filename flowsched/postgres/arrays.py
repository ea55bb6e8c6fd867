"""Internal: the firing path's array parameters, each dumped in one go.

A batch is one statement over parallel arrays (the settle of 64 outcomes sends five arrays of
64). psycopg dumps a ``list`` element by element, looking up each list's element type first;
at the rates a node fires, that was a large share of a settle's CPU. The plans wrap the
arrays whose element type they know in these list types, which psycopg dumps in binary as a
whole (registered on its global adapters when this module is imported):

* :class:`TextArray` - ``text[]``, each element a ``str`` or ``None``, encoded as psycopg
  encodes text for the connection (its client encoding; UTF-8 for an ASCII one);
* :class:`Int8Array` - ``bigint[]``, each element an ``int`` of at most 64 bits or
  ``None`` (the statements cast it to what they need, ``int[]`` say).

The bytes on the wire are those of a binary array psycopg would send (the same element
encoding; ``bigint`` elements where psycopg picks the smallest integer type, the statement's
cast making them the same). They are lists: a connection whose adapters were copied before
this module was imported dumps them as any list, with the same result.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.adapt import Buffer, Dumper
from psycopg.pq import Format

__all__ = ["Int8Array", "TextArray"]

_TEXT_OID, _TEXT_ARRAY_OID = 25, 1009
_INT8_OID, _INT8_ARRAY_OID = 20, 1016
_head = struct.Struct("!iIIii").pack  # ndim, has nulls, element oid, length, lower bound
_empty = struct.Struct("!iII").pack  # an empty array: no dimension
_length = struct.Struct("!i").pack
_NULL = b"\xff\xff\xff\xff"  # an element's length of -1: NULL


class TextArray(list[str | None]):
    """A ``text[]`` parameter (see the module docstring)."""

    __slots__ = ()


class Int8Array(list[int | None]):
    """A ``bigint[]`` parameter (see the module docstring)."""

    __slots__ = ()


class _TextArrayDumper(Dumper):
    format = Format.BINARY
    oid = _TEXT_ARRAY_OID

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        connection = self.connection
        encoding = "utf-8" if connection is None else connection.info.encoding
        self._encoding = "utf-8" if encoding == "ascii" else encoding  # as psycopg's str

    def dump(self, obj: list[str | None]) -> Buffer:
        count = len(obj)
        if not count:
            return _empty(0, 0, _TEXT_OID)
        encoding = self._encoding
        first = obj[0]
        if first is not None and obj.count(first) == count:  # one value (the owner)
            data = first.encode(encoding)
            return _head(1, 0, _TEXT_OID, count, 1) + (_length(len(data)) + data) * count
        parts = [b""]
        add = parts.extend
        nulls = 0
        for value in obj:
            if value is None:
                nulls = 1
                parts.append(_NULL)
            else:
                data = value.encode(encoding)
                add((_length(len(data)), data))
        parts[0] = _head(1, nulls, _TEXT_OID, count, 1)
        return b"".join(parts)


@lru_cache(maxsize=64)
def _whole_numbers(count: int) -> struct.Struct:
    """``count`` elements of 8 bytes, each after its length, after the array's head."""
    return struct.Struct("!iIIii" + "iq" * count)


class _Int8ArrayDumper(Dumper):
    format = Format.BINARY
    oid = _INT8_ARRAY_OID

    def dump(self, obj: list[int | None]) -> Buffer:
        count = len(obj)
        if not count:
            return _empty(0, 0, _INT8_OID)
        try:
            if None not in obj:
                flat: list[int | None] = [8] * (2 * count)
                flat[1::2] = obj
                return _whole_numbers(count).pack(1, 0, _INT8_OID, count, 1, *flat)
            parts = [_head(1, 1, _INT8_OID, count, 1)]
            for value in obj:
                parts.append(_NULL if value is None else struct.pack("!iq", 8, value))
            return b"".join(parts)
        except struct.error:
            raise psycopg.DataError(
                f"a bigint[] element is not a 64-bit integer: {obj!r:.200}"
            ) from None


psycopg.adapters.register_dumper(TextArray, _TextArrayDumper)
psycopg.adapters.register_dumper(Int8Array, _Int8ArrayDumper)
