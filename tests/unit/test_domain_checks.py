"""The domain checks' fast paths refuse exactly what the straightforward
checks refused, with the same errors, and accept the same values unchanged.
Each fast path is compared with a copy of the code it replaced."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contracts import domain
from contracts.domain import (
    PROPERTY_KEY_PATTERN,
    VectorRecord,
    check_metadata_value,
    check_properties,
    check_property_value,
)
from contracts.ids import EntityId, TenantId, check_id_text

# -- the code the fast paths replaced ------------------------------------------


def old_finite_numbers(values: tuple[object, ...]) -> bool:
    if set(map(type, values)) <= frozenset({float, int, bool}):
        return all(map(math.isfinite, values))  # type: ignore[arg-type]
    return all(isinstance(x, int | float) and math.isfinite(x) for x in values)


def old_vector_record_checks(id: str, vector: tuple[Any, ...], metadata: Any) -> None:
    check_id_text(id, "vector id")
    if not vector:
        raise ValueError("a vector must have at least one component")
    if not old_finite_numbers(vector):
        raise ValueError(f"vector {id!r} has a non-finite or non-numeric component")
    check_metadata_value(metadata, f"vector {id!r} metadata")


def old_check_properties(properties: dict[Any, Any], where: str) -> None:
    for key, value in properties.items():
        if not isinstance(key, str) or not PROPERTY_KEY_PATTERN.fullmatch(key):
            raise ValueError(
                f"{where}: property key {key!r} must match {PROPERTY_KEY_PATTERN.pattern}"
            )
        check_property_value(value, f"{where}.{key}")


def outcome(call: Any, *args: Any) -> tuple[object, ...]:
    try:
        result = call(*args)
    except Exception as exc:  # any error is an outcome to compare
        return ("error", type(exc), str(exc))
    return ("ok", repr(result))


# -- values ---------------------------------------------------------------------


class Real(float):
    pass


class Whole(int):
    pass


class Text(str):
    pass


FLOAT_OVERFLOW = 2**1024 - 2**970  # float() of it raises OverflowError
odd_numbers = st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        -0.0,
        1.7976931348623157e308,
        5e-324,
        True,
        False,
        0,
        2**63,
        -(2**63),
        2**63 - 1,
        -(2**63) - 1,
        FLOAT_OVERFLOW,
        -FLOAT_OVERFLOW,
        Real(0.5),
        Real(math.nan),
        Whole(3),
        Whole(2**64),
        Fraction(1, 3),
        Decimal("0.5"),
        "0.5",
        None,
    ]
)
components = st.one_of(
    st.floats(),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1.0, max_value=1.0),
    st.integers(min_value=-(2**70), max_value=2**70),
    odd_numbers,
)
texts = st.text(max_size=6)  # every code point, lone surrogates and NUL included
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts | texts.map(Text),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(texts | st.integers(), inner, max_size=3)
    ),
    max_leaves=6,
)
metadata = st.one_of(
    st.dictionaries(texts, texts, max_size=4),
    st.dictionaries(texts | texts.map(Text) | st.integers(), json_values, max_size=3),
    st.lists(texts, max_size=2),
    st.just({}),
)


@given(vector=st.lists(components, max_size=6))
@example(vector=[1e308, 1e308])  # finite, but the sum overflows
@example(vector=[FLOAT_OVERFLOW, -FLOAT_OVERFLOW])  # cancel out in a sum
@example(vector=[math.nan, FLOAT_OVERFLOW])
@example(vector=[Fraction(1, 2), 0.5])  # sums to a float
@example(vector=[math.inf, -math.inf])
def test_finite_numbers_agrees_with_the_per_component_check(vector: list[Any]) -> None:
    values = tuple(vector)
    assert outcome(domain._finite_numbers, values) == outcome(old_finite_numbers, values)


@given(
    id=st.sampled_from(["e", "", "e\x00", "e\udc80", "x" * 257]) | texts,
    vector=st.lists(components, max_size=4) | st.lists(st.floats(), min_size=1, max_size=4),
    metadata=metadata,
)
@example(id="e", vector=[0.5], metadata={"name": "a\x00"})
@example(id="e", vector=[0.5], metadata={"name": "\ud800"})
@example(id="e", vector=[0.5], metadata={"na\x00me": "a"})
@example(id="e", vector=[0.5], metadata={Text("name"): "a\x00"})
@example(id="e", vector=[0.5], metadata={"name": Text("a")})
@example(id="e", vector=[0.5], metadata={"n": ["a\x00"]})
@example(id="e\x00", vector=[math.nan], metadata={"n": "\x00"})
@example(id="e", vector=[math.nan], metadata={"n": "\x00"})
def test_vector_records_refuse_what_they_refused(id: str, vector: list[Any], metadata: Any) -> None:
    values = tuple(vector)
    made = outcome(VectorRecord, TenantId("t"), EntityId(id), values, metadata)
    expected = outcome(old_vector_record_checks, id, values, metadata)
    assert made[0] == expected[0]
    if made[0] == "error":
        assert made == expected


def record_outcome(call: Any, *args: Any) -> tuple[object, ...]:
    try:
        record = call(*args)
    except Exception as exc:  # any error is an outcome to compare
        return ("error", type(exc), str(exc))
    assert type(record) is VectorRecord
    return (
        "ok",
        record.tenant_id,
        record.id,
        [(type(x), repr(x)) for x in record.vector],
        type(record.vector),
        repr(record.metadata),
    )


@given(
    id=st.sampled_from(["e", "", "e\x7f"]) | texts,
    floats=st.lists(st.floats() | st.sampled_from([1e308, -0.0, math.nan]), max_size=4),
    metadata=metadata,
)
@example(id="e", floats=[1e308, 1e308], metadata={})
@example(id="e\x00", floats=[math.inf], metadata={})
@example(id="e", floats=[], metadata={"n": "\x00"})
def test_from_floats_makes_what_the_constructor_makes(
    id: str, floats: list[float], metadata: Any
) -> None:
    made = record_outcome(VectorRecord.from_floats, TenantId("t"), EntityId(id), floats, metadata)
    assert made == record_outcome(
        VectorRecord, TenantId("t"), EntityId(id), tuple(floats), metadata
    )


@pytest.mark.parametrize(
    "vector",
    [["0.5"], [None], [0.5, "x"], [FLOAT_OVERFLOW, 1.0], [FLOAT_OVERFLOW, -FLOAT_OVERFLOW], [1, 2]],
)
def test_from_floats_given_other_than_floats_still_refuses_as_the_constructor(
    vector: list[Any],
) -> None:
    """Not what its callers pass, but anything that does not sum to a finite
    number goes to the constructor, with its error."""
    made = record_outcome(VectorRecord.from_floats, TenantId("t"), EntityId("e"), vector, {})
    assert made == record_outcome(VectorRecord, TenantId("t"), EntityId("e"), tuple(vector), {})


def test_from_floats_does_not_convert() -> None:
    record = VectorRecord.from_floats(TenantId("t"), EntityId("e"), [0.5, -0.0], {"a": "b"})
    assert record.vector == (0.5, -0.0) and math.copysign(1, record.vector[1]) == -1
    assert record == VectorRecord(TenantId("t"), EntityId("e"), (0.5, -0.0), {"a": "b"})
    with pytest.raises(AttributeError):
        record.id = EntityId("f")  # type: ignore[misc]


@given(metadata=metadata)
@example(metadata={"a": "\x00"})
@example(metadata={"\udfff": "a"})
@example(metadata={"a": "b", "c": "\ud800"})
@example(metadata={"a": "b", 1: "c"})
def test_metadata_fast_path_refuses_what_the_full_check_refuses(metadata: Any) -> None:
    assert outcome(domain._check_metadata, metadata, "m") == outcome(
        check_metadata_value, metadata, "m"
    )


property_values = st.one_of(
    components,
    texts,
    texts.map(Text),
    st.lists(components | texts, max_size=3),
    st.dictionaries(texts, texts, max_size=1),
)


@given(
    properties=st.dictionaries(
        st.sampled_from(["a", "b_1", "_c", "bad key", "9", ""]) | texts | st.integers(),
        property_values,
        max_size=4,
    )
)
@example(properties={"a": 2**63})
@example(properties={"a": -(2**63) - 1})
@example(properties={"a": Whole(2**63)})
@example(properties={"a": math.nan, "bad key": 1})
@example(properties={"a": Real(math.inf)})
@example(properties={"a": FLOAT_OVERFLOW})
def test_property_checks_refuse_what_they_refused(properties: dict[Any, Any]) -> None:
    assert outcome(check_properties, properties, "p") == outcome(
        old_check_properties, properties, "p"
    )
