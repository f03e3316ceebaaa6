"""``float32_vector`` packs with ``struct`` and hands anything unusual to the
exact path: the result must be what ``array('f')`` and the byte search for an
infinity made of every input, in the bytes pgvector's own ``Vector`` sends.
``encode_vector`` sends those bytes unchanged, and anything else as pgvector
does."""

from __future__ import annotations

import json
import math
import struct
import sys
from array import array
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pgvector import Vector

from adapters.pgvector import codec
from adapters.pgvector.codec import (
    FLOAT32_MAX,
    WireVector,
    decode_metadata,
    encode_metadata,
    encode_vector,
    float32_vector,
)

_INFINITIES = (array("f", [math.inf]).tobytes(), array("f", [-math.inf]).tobytes())


def old_float32_vector(values: Any) -> Vector | None:
    """The implementation before ``struct``: the behaviour to keep."""
    try:
        components = array("f", values)
    except OverflowError:
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
    return Vector.from_binary(struct.pack(">HH", len(components), 0) + components.tobytes())


def outcome(values: Any, convert: Any) -> tuple[object, ...]:
    try:
        vector = convert(values)
    except Exception as exc:  # any error is an outcome to compare
        return ("error", type(exc), str(exc))
    # Bytes, not equality: a NaN component is never equal to itself.
    if vector is None:
        return ("none",)
    return ("vector", vector.to_binary() if isinstance(vector, Vector) else bytes(vector))


#: The float64 values either side of where float32 rounding turns infinite.
HALFWAY = 3.4028235677973366e38  # FLOAT32_MAX + half an ulp of float32: rounds to inf
edges = st.sampled_from(
    [
        FLOAT32_MAX,
        -FLOAT32_MAX,
        math.nextafter(HALFWAY, 0),
        HALFWAY,
        -HALFWAY,
        math.nextafter(HALFWAY, math.inf),
        2.0**127,
        math.nextafter(2.0**127, 0),
        -(2.0**127),
        1e39,
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        1e-46,
        1.4e-45,
        2**1024 - 2**970,
        2**80,
        True,
        Decimal("0.5"),
    ]
)
components = st.one_of(
    st.floats(),
    st.floats(width=32),
    st.floats(min_value=-1.0, max_value=1.0),
    st.integers(min_value=-(2**130), max_value=2**130),
    edges,
)


@given(values=st.lists(components, max_size=8).map(tuple))
@example(values=(math.inf,))
@example(values=(0.5, -math.inf))
@example(values=(HALFWAY,))
@example(values=(math.nextafter(HALFWAY, 0),))
@example(values=(math.nan, 2.0**127))
@example(values=(2**1024 - 2**970,))
@example(values=())
def test_float32_vector_agrees_with_the_array_path(values: tuple[Any, ...]) -> None:
    assert outcome(values, float32_vector) == outcome(values, old_float32_vector)


@pytest.mark.parametrize("values", [("x",), [0.5, None], (0.5, "1")])
def test_what_is_not_a_number_fails_as_it_did(values: Any) -> None:
    assert outcome(values, float32_vector) == outcome(values, old_float32_vector)
    assert outcome(values, float32_vector)[0] == "error"


def test_ordinary_vectors_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(values: Any) -> None:
        raise AssertionError("took the exact path")

    monkeypatch.setattr(codec, "_float32_vector_exactly", refuse)
    for values in [tuple((i - 192) / 97 for i in range(384)), [1e38, -1e-40, 0.0, -0.0], [1, 2]]:
        vector = float32_vector(values)
        assert vector is not None
        assert Vector.from_binary(vector).to_list() == list(array("f", values))
    with pytest.raises(AssertionError, match="exact path"):
        float32_vector([math.inf])


@given(values=st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=8))
def test_a_packed_vector_is_sent_as_it_is_and_reads_back_as_its_components(
    values: list[float],
) -> None:
    packed = float32_vector(values)
    assert isinstance(packed, WireVector)
    sent = encode_vector(packed)
    assert sent == Vector(values).to_binary()
    assert Vector.from_binary(sent).to_list() == values


@pytest.mark.parametrize("value", [[0.5, -2.0], [1.0], Vector([0.25, 3.0])])
def test_other_values_are_encoded_as_pgvector_encodes_them(value: Any) -> None:
    expected = (value if isinstance(value, Vector) else Vector(value)).to_binary()
    assert encode_vector(value) == expected


_texts = st.text() | st.sampled_from(["", "é", "\ud800", '"', "\\", "\n", "\x00", "\u2028"])


@given(metadata=st.dictionaries(_texts, _texts, max_size=4))
def test_string_metadata_is_written_as_json_dumps_writes_it(metadata: dict[str, str]) -> None:
    assert encode_metadata(metadata) == json.dumps(metadata)


@given(
    metadata=st.dictionaries(
        _texts,
        _texts | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.none(),
        max_size=4,
    )
)
def test_any_storable_metadata_reads_back_as_it_was(metadata: dict[str, Any]) -> None:
    assert decode_metadata(encode_metadata(metadata)) == metadata
