"""Python values <-> what the pgvector tables hold.

Metadata goes into ``jsonb``, which keeps numbers as ``numeric``. A float
written the way ``json.dumps`` writes it can come back as something else:
``1e+23`` is read as the integer 10**23, which is not the float 1e23, and
``1e+16`` comes back as an ``int``. So floats whose shortest form has a
positive exponent are written as their exact decimal value with a ``.0``
(Postgres keeps that scale, so they read back as the same float). Everything
else is plain ``json.dumps``.

Vectors go into ``vector(n)``, which holds float32: a finite float64 beyond
float32's range cannot be stored, and is refused before any SQL. A vector to
write is packed once, into pgvector's binary input format (``WireVector``),
and the connections' codec sends those bytes as they are (``encode_vector``).
"""

from __future__ import annotations

import json
import math
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from pgvector import Vector

from contracts.validation import FLOAT32_MAX, storable_text

#: json.dumps's own string encoder (its default, ensure_ascii).
_quoted: Callable[[str], str] = json.encoder.encode_basestring_ascii

__all__ = [
    "FLOAT32_MAX",
    "WireVector",
    "decode_metadata",
    "encode_metadata",
    "encode_vector",
    "float32_vector",
    "query_components",
    "storable_text",
]


def encode_metadata(metadata: dict[str, Any]) -> str:
    # A record's metadata is its entity's type, name and document id: strings
    # only, written by the C string encoder json.dumps uses, without building
    # an encoder per call (about half the time; the same text).
    members = []
    for key, value in metadata.items():
        if type(key) is not str or type(value) is not str:
            break
        members.append(_quoted(key) + ": " + _quoted(value))
    else:
        return "{" + ", ".join(members) + "}"
    text = json.dumps(metadata)
    # Only a float's exponent form ("1e+23") is at risk; a string holding "e+"
    # takes the slow path too, which is merely slower.
    if "e+" not in text:
        return text
    parts: list[str] = []
    _encode(metadata, parts.append)
    return "".join(parts)


def _encode(value: Any, out: Callable[[str], object]) -> None:
    if isinstance(value, float):
        # Integral floats are exact integers: write every digit, keep the ".0".
        out(f"{int(value)}.0" if value.is_integer() else repr(value))
    elif isinstance(value, list):
        out("[")
        for index, item in enumerate(value):
            if index:
                out(",")
            _encode(item, out)
        out("]")
    elif isinstance(value, dict):
        out("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out(",")
            out(json.dumps(key))
            out(":")
            _encode(item, out)
        out("}")
    else:
        out(json.dumps(value))


def decode_metadata(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"stored metadata is {type(value).__name__}, not an object")
    return value


_INFINITIES = (array("f", [math.inf]).tobytes(), array("f", [-math.inf]).tobytes())
_HEADER = struct.Struct(">HH")


class WireVector(bytes):
    """A vector in pgvector's binary input format: its dimension as a
    big-endian uint16, a uint16 zero, then each component as a big-endian
    float32. ``encode_vector`` sends it unchanged: a pgvector ``Vector``
    would unpack these bytes into an array and pack them again, 1.5% of a
    busy worker's event loop and more inside asyncpg's encoder
    (docs/performance.md, "The event loop's own CPU")."""

    __slots__ = ()


def encode_vector(value: Any) -> bytes:
    """The connections' encoder for ``vector``: a ``WireVector`` as it is,
    anything else as pgvector encodes it (a query's ``Vector``, a list)."""
    if isinstance(value, WireVector):
        return value
    vector = value if isinstance(value, Vector) else Vector(value)
    return bytes(vector.to_binary())


@lru_cache(maxsize=8)
def _float32_body(count: int) -> struct.Struct:
    return struct.Struct(f">{count}f")


def float32_vector(values: Sequence[float]) -> WireVector | None:
    """``values`` as the bytes pgvector reads (``WireVector``), or None if
    float32 cannot hold a component (it would become infinite, which pgvector
    refuses).

    This is on the write path of every vector, so the work stays in C: one
    ``struct`` pack straight to big-endian float32 (it converts each component
    as ``array('f')`` does, ``(float)`` of the double, and raises
    ``OverflowError`` where that cast would make a finite component infinite).
    Anything unusual (an error, an infinity or a NaN in ``values``) goes
    through :func:`_float32_vector_exactly`, which decides it as before. The
    pack costs about half of an ``array('f', values)``, which ran
    ``PyArg_Parse`` per component."""
    count = len(values)
    try:
        packed = _float32_body(count).pack(*values)
    except (OverflowError, struct.error):  # too large for float32; not a number
        return _float32_vector_exactly(values)
    # A finite component cannot have become infinite (the pack raised), but
    # ``values`` may hold an infinity. The first byte of each big-endian float32
    # is the sign and the exponent's top seven bits: 0x7F or 0xFF there means an
    # infinity, a NaN or a magnitude of at least 2**127, all rare enough to hand
    # to the exact path. (A byte search for the infinities took four times as long.)
    leading = packed[::4]
    if 0x7F in leading or 0xFF in leading:
        return _float32_vector_exactly(values)
    return WireVector(_HEADER.pack(count, 0) + packed)


def _float32_vector_exactly(values: Sequence[float]) -> WireVector | None:
    """:func:`float32_vector` one step at a time: ``array('f')`` converts, a
    byte search finds an infinity at an element boundary."""
    try:
        components = array("f", values)
    except OverflowError:  # an int too large for any float
        return None
    raw = components.tobytes()
    for infinity in _INFINITIES:
        at = raw.find(infinity)
        while at != -1:
            if at % 4 == 0:
                return None
            at = raw.find(infinity, at + 1)
    if sys.byteorder == "little":
        components.byteswap()
    return WireVector(_HEADER.pack(len(components), 0) + components.tobytes())


def query_components(vector: Sequence[float]) -> list[float]:
    """The query scaled by a power of two so that it fits float32 without
    overflowing or vanishing. Cosine ignores magnitude and a power-of-two
    scale is exact, so this changes no score; it only lets a query like
    ``(1e39, 0, ...)`` mean what it means in the reference store."""
    largest = max((abs(x) for x in vector), default=0.0)
    if largest == 0.0:
        return [float(x) for x in vector]
    _, exponent = math.frexp(largest)
    return [math.ldexp(float(x), -exponent) for x in vector]
