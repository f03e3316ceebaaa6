"""Python values <-> what the pgvector tables hold.

Metadata goes into ``jsonb``, which keeps numbers as ``numeric``. A float
written the way ``json.dumps`` writes it can come back as something else:
``1e+23`` is read as the integer 10**23, which is not the float 1e23, and
``1e+16`` comes back as an ``int``. So floats whose shortest form has a
positive exponent are written as their exact decimal value with a ``.0``
(Postgres keeps that scale, so they read back as the same float). Everything
else is plain ``json.dumps``.

Vectors go into ``vector(n)``, which holds float32: a finite float64 beyond
float32's range cannot be stored, and is refused before any SQL.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "FLOAT32_MAX",
    "decode_metadata",
    "encode_metadata",
    "query_components",
    "storable_text",
    "unstorable_components",
]

FLOAT32_MAX = 3.4028234663852886e38


def encode_metadata(metadata: dict[str, Any]) -> str:
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


def unstorable_components(vector: Sequence[float]) -> list[int]:
    """Indexes of components float32 cannot hold (they would become infinite)."""
    return [i for i, x in enumerate(vector) if abs(x) > FLOAT32_MAX]


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


def storable_text(value: str) -> bool:
    """Whether Postgres ``text`` can hold ``value`` (no NUL, no lone surrogate)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
